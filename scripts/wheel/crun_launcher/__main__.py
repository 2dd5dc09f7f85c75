"""python -m crun_launcher ARGS: the same as crun ARGS."""
from crun_launcher import main

main()
