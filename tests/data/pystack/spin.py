def spin():
    while True:
        pass
spin()
