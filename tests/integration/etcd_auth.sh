#!/bin/sh
# etcd with authentication (user and password_file: right password works,
# a wrong one gives one clear line) and with TLS (a CA, a server and a
# client certificate made here with the openssl CLI; etcd demands the
# client certificate).
. tests/integration/lib.sh
. tests/integration/lib_etcd.sh
need_etcd
command -v openssl >/dev/null || skip "no openssl CLI"

FAST="last_call_timeout=1,join_timeout=20,lease_ttl=2,read_timeout=5"
# two AGENT_FLAGS...: a 2-node job (1 worker each); sets rc_a, rc_b.
two() {
	"$CRUN" --nnodes=2 --nproc_per_node=1 --rdzv_backend=etcd --rdzv_endpoint="$EP" \
		--rdzv_id="$JOB" "$@" "$FAKE_WORKER" ${W:-} append "$T/runs-$JOB" run >"$T/$JOB-a.out" 2>&1 & pa=$!
	"$CRUN" --nnodes=2 --nproc_per_node=1 --rdzv_backend=etcd --rdzv_endpoint="$EP" \
		--rdzv_id="$JOB" "$@" "$FAKE_WORKER" ${W:-} append "$T/runs-$JOB" run >"$T/$JOB-b.out" 2>&1 & pb=$!
	at_exit "kill -9 $pa $pb 2>/dev/null"
	wait $pa; rc_a=$?; wait $pb; rc_b=$?
}

# 1. Auth: root with a password; the token goes in the Authorization header.
#    Tokens live 1 s here, so the job (workers run 3 s) must renew them.
etcd_cluster 1 --auth-token-ttl=1
EP=$ETCD_EP
etcd_ctl m1 user add root:s3cret >/dev/null 2>&1 || fail "user add"
etcd_ctl m1 role add root >/dev/null 2>&1
etcd_ctl m1 user grant-role root root >/dev/null 2>&1
etcd_ctl m1 auth enable >/dev/null 2>&1 || fail "auth enable"
printf 's3cret\n' >"$T/pw"; printf 'wrong\n' >"$T/bad"
note "1. etcd auth: right password, tokens expiring every second"
JOB=authok; W="sleep 3000" two --rdzv_conf=$FAST,user=root,password_file=$T/pw
[ $rc_a = 0 ] && [ $rc_b = 0 ] || { cat "$T/$JOB-a.out" "$T/$JOB-b.out" >&2; fail "job with the right password failed ($rc_a, $rc_b)"; }
expect_eq "both ranks ran" "$(sort "$T/runs-$JOB" | tr '\n' ' ')" "run 0 0 run 1 0 "
note "   etcd restarted mid-run: its tokens are gone; the agents authenticate again"
JOB=authrestart
"$CRUN" --nnodes=2 --nproc_per_node=1 --rdzv_backend=etcd --rdzv_endpoint="$EP" --rdzv_id=$JOB \
	--rdzv_conf=$FAST,read_timeout=15,user=root,password_file=$T/pw "$FAKE_WORKER" sleep 4000 append "$T/runs-$JOB" run >"$T/$JOB-a.out" 2>&1 & pa=$!
"$CRUN" --nnodes=2 --nproc_per_node=1 --rdzv_backend=etcd --rdzv_endpoint="$EP" --rdzv_id=$JOB \
	--rdzv_conf=$FAST,read_timeout=15,user=root,password_file=$T/pw "$FAKE_WORKER" sleep 4000 append "$T/runs-$JOB" run >"$T/$JOB-b.out" 2>&1 & pb=$!
at_exit "kill -9 $pa $pb 2>/dev/null"
wait_for 20 sh -c "grep -q 'round 0' '$T/$JOB-a.out' && grep -q 'round 0' '$T/$JOB-b.out'" || fail "round 0 never formed"
etcd_kill m1
sleep 1
etcd_start m1 --auth-token-ttl=1
wait $pa; rc_a=$?; wait $pb; rc_b=$?
[ $rc_a = 0 ] && [ $rc_b = 0 ] || { cat "$T/$JOB-a.out" "$T/$JOB-b.out" >&2; fail "job across an etcd restart failed ($rc_a, $rc_b)"; }
expect_eq "both ranks ran once" "$(sort "$T/runs-$JOB" | tr '\n' ' ')" "run 0 0 run 1 0 "
note "   wrong password"
JOB=authbad; two --rdzv_conf=$FAST,user=root,password_file=$T/bad
[ $rc_a != 0 ] && [ $rc_b != 0 ] || fail "a wrong password did not fail the agents ($rc_a, $rc_b)"
expect_grep "clear line" "etcd refused user 'root' (etcdserver: authentication failed, invalid user ID or password): check the user and password_file" "$T/$JOB-a.out"
expect_eq "one line about etcd" "$(grep -c etcd "$T/$JOB-a.out")" 1
[ ! -f "$T/runs-$JOB" ] || fail "workers ran without credentials"
sed 's/^/      /' "$T/$JOB-a.out"
note "   no credentials at all"
JOB=authnone; two --rdzv_conf=$FAST
[ $rc_a != 0 ] && [ $rc_b != 0 ] || fail "no credentials did not fail the agents"
grep -h -m1 "crun:" "$T/$JOB-a.out" | sed 's/^/      /'
etcd_kill m1

# 2. TLS with client certificates.
note "2. TLS: CA, server and client certificates from openssl"
P="$T/pki"; mkdir "$P"
(
	cd "$P" &&
	openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 1 -subj /CN=crun-test-ca &&
	openssl req -newkey rsa:2048 -nodes -keyout server.key -out server.csr -subj /CN=127.0.0.1 &&
	# etcd's gateway dials its own gRPC port with the server certificate.
	printf 'subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth,clientAuth\n' >server.ext &&
	openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out server.pem -days 1 -extfile server.ext &&
	openssl req -newkey rsa:2048 -nodes -keyout client.key -out client.csr -subj /CN=crun-client &&
	printf 'extendedKeyUsage=clientAuth\n' >client.ext &&
	openssl x509 -req -in client.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out client.pem -days 1 -extfile client.ext
) >"$T/openssl.log" 2>&1 || { cat "$T/openssl.log" >&2; fail "openssl could not make the certificates"; }
ETCD_SCHEME=https ETCDCTL_FLAGS="--cacert=$P/ca.pem --cert=$P/client.pem --key=$P/client.key"
etcd_cluster 1 --cert-file="$P/server.pem" --key-file="$P/server.key" --client-cert-auth --trusted-ca-file="$P/ca.pem"
EP=$ETCD_EP
JOB=tls; two --rdzv_conf=$FAST,protocol=https,cacert=$P/ca.pem,cert=$P/client.pem,key=$P/client.key
[ $rc_a = 0 ] && [ $rc_b = 0 ] || { cat "$T/$JOB-a.out" "$T/$JOB-b.out" >&2; fail "TLS job failed ($rc_a, $rc_b)"; }
expect_eq "both ranks ran over TLS" "$(sort "$T/runs-$JOB" | tr '\n' ' ')" "run 0 0 run 1 0 "
note "   https:// endpoint URL, no client certificate: refused"
EP="https://$ETCD_EP"
JOB=tlsnocert; two --rdzv_conf=$FAST,cacert=$P/ca.pem
[ $rc_a != 0 ] && [ $rc_b != 0 ] || fail "etcd let a client without certificate in"
grep -h -m1 "crun:" "$T/$JOB-a.out" | sed 's/^/      /'
exit 0
