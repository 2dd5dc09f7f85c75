/*
 * The etcd v3 gateway encoding (etcd's grpc-gateway JSON): base64 of
 * keys and values, int64 fields as strings or left out, prefix range ends,
 * the shapes of put, range, compare-and-set and mod_revision txns, watch
 * requests, reading kvs back, and endpoint lists.
 */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "crun/cfg.h"
#include "crun/err.h"
#include "crun/etcd.h"
#include "crun/rdzv_etcd.h"

static char *dump(json_t *j)
{
	char *s = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);

	json_decref(j);
	return s;
}

Test(etcd, base64_known_vectors)
{
	/* RFC 4648 test vectors, and the spec's prefix example. */
	static const char *in[] = {"", "f", "fo", "foo", "foob", "fooba",
				   "foobar", "/crun/j1/"};
	static const char *out[] = {"",	    "Zg==",	"Zm8=",	    "Zm9v",
				    "Zm9vYg==", "Zm9vYmE=", "Zm9vYmFy", "L2NydW4vajEv"};

	for (size_t i = 0; i < sizeof(in) / sizeof(*in); i++) {
		json_t *j = etcd_b64(in[i], strlen(in[i]));

		cr_assert_str_eq(json_string_value(j), out[i], "b64('%s')",
				 in[i]);
		json_decref(j);
	}
}

Test(etcd, base64_round_trip_binary)
{
	unsigned char raw[256];
	char *back = NULL;
	size_t n = 0;

	for (int i = 0; i < 256; i++)
		raw[i] = (unsigned char)(255 - i);
	for (size_t len = 0; len <= sizeof(raw); len += 37) {
		json_t *j = etcd_b64(raw, len);

		cr_assert_eq(etcd_unb64(j, &back, &n), 0);
		cr_assert_eq(n, len);
		cr_assert_eq(memcmp(back, raw, len), 0);
		cr_assert_eq(back[n], '\0', "decoded values end in NUL");
		free(back);
		json_decref(j);
	}
}

Test(etcd, base64_rejects_garbage)
{
	json_t *j = json_string("Zm9v!!");
	char *out = NULL;
	size_t n;

	cr_assert_eq(etcd_unb64(j, &out, &n), CRUN_EPROTO);
	cr_assert_null(out);
	json_decref(j);
	cr_assert_eq(etcd_unb64(NULL, &out, &n), CRUN_EPROTO);
}

Test(etcd, int64_fields_as_strings_numbers_or_absent)
{
	json_t *o = json_loads("{\"revision\":\"5\",\"ID\":\"7587869562187137302\","
			       "\"TTL\":10,\"neg\":\"-1\"}",
			       0, NULL);

	cr_assert_eq(etcd_int(o, "revision"), 5);
	/* Beyond 2^53: a double would lose it. */
	cr_assert_eq(etcd_int(o, "ID"), 7587869562187137302LL);
	cr_assert_eq(etcd_int(o, "TTL"), 10);
	cr_assert_eq(etcd_int(o, "neg"), -1);
	cr_assert_eq(etcd_int(o, "count"), 0, "zero values are left out");
	cr_assert_eq(etcd_int(NULL, "x"), 0);
	json_decref(o);
}

Test(etcd, prefix_end)
{
	char out[32];

	cr_assert_eq(etcd_prefix_end("/crun/j1/", out, sizeof(out)), 0);
	cr_assert_str_eq(out, "/crun/j10");
	cr_assert_eq(etcd_prefix_end("a\xff", out, sizeof(out)), 0);
	cr_assert_str_eq(out, "b", "a trailing 0xff carries");
	cr_assert_eq(etcd_prefix_end("", out, sizeof(out)), CRUN_EUSAGE);
	cr_assert_eq(etcd_prefix_end("\xff\xff", out, sizeof(out)),
		     CRUN_EUSAGE);
}

Test(etcd, put_and_range_requests)
{
	char *s = dump(etcd_put_req("/k", "v", 1, "7587869562187137302"));

	cr_assert_str_eq(s, "{\"key\":\"L2s=\",\"lease\":\"7587869562187137302\","
			    "\"value\":\"dg==\"}");
	free(s);
	s = dump(etcd_put_req("/k", "", 0, NULL));
	cr_assert_str_eq(s, "{\"key\":\"L2s=\",\"value\":\"\"}", "no lease");
	free(s);
	s = dump(etcd_range_req("/a/", "/a0"));
	cr_assert_str_eq(s, "{\"key\":\"L2Ev\",\"range_end\":\"L2Ew\"}");
	free(s);
}

Test(etcd, cas_txn_on_value)
{
	char *s = dump(etcd_txn_cas("/k", 0, "0", 1, "2", 1, "9"));

	cr_assert_str_eq(
	    s, "{\"compare\":[{\"key\":\"L2s=\",\"result\":\"EQUAL\","
	       "\"target\":\"VALUE\",\"value\":\"MA==\"}],"
	       "\"failure\":[{\"request_range\":{\"key\":\"L2s=\"}}],"
	       "\"success\":[{\"request_put\":{\"key\":\"L2s=\",\"lease\":\"9\","
	       "\"value\":\"Mg==\"}}]}");
	free(s);
}

Test(etcd, cas_txn_create_if_absent)
{
	char *s = dump(etcd_txn_cas("/k", 1, "", 0, "x", 1, NULL));

	cr_assert_str_eq(
	    s, "{\"compare\":[{\"create_revision\":\"0\",\"key\":\"L2s=\","
	       "\"result\":\"EQUAL\",\"target\":\"CREATE\"}],"
	       "\"failure\":[{\"request_range\":{\"key\":\"L2s=\"}}],"
	       "\"success\":[{\"request_put\":{\"key\":\"L2s=\",\"value\":"
	       "\"eA==\"}}]}");
	free(s);
}

Test(etcd, mod_revision_txn)
{
	char *s = dump(etcd_txn_mod("/c", 123456789012LL, "3 n:1", 5, "9"));

	cr_assert_str_eq(
	    s, "{\"compare\":[{\"key\":\"L2M=\",\"mod_revision\":\"123456789012\","
	       "\"result\":\"EQUAL\",\"target\":\"MOD\"}],"
	       "\"failure\":[{\"request_range\":{\"key\":\"L2M=\"}}],"
	       "\"success\":[{\"request_put\":{\"key\":\"L2M=\",\"lease\":\"9\","
	       "\"value\":\"MyBuOjE=\"}}]}");
	free(s);
}

Test(etcd, txn_of_ranges_and_puts)
{
	const char *keys[] = {"/a", "/b"};
	const void *vals[] = {"1", "22"};
	size_t lens[] = {1, 2};
	char *s = dump(etcd_txn_ranges(keys, 2));

	cr_assert_str_eq(s, "{\"compare\":[],\"failure\":[],\"success\":["
			    "{\"request_range\":{\"key\":\"L2E=\"}},"
			    "{\"request_range\":{\"key\":\"L2I=\"}}]}");
	free(s);
	s = dump(etcd_txn_puts(keys, vals, lens, 2, "0"));
	cr_assert_str_eq(s, "{\"compare\":[],\"failure\":[],\"success\":["
			    "{\"request_put\":{\"key\":\"L2E=\",\"value\":\"MQ==\"}},"
			    "{\"request_put\":{\"key\":\"L2I=\",\"value\":\"MjI=\"}}]}");
	free(s);
}

Test(etcd, watch_request)
{
	char *s = dump(etcd_watch_req("/crun/j1/", 42));

	cr_assert_str_eq(s, "{\"create_request\":{\"key\":\"L2NydW4vajEv\","
			    "\"range_end\":\"L2NydW4vajEw\","
			    "\"start_revision\":\"42\"}}");
	free(s);
	s = dump(etcd_watch_req("/crun/j1/", 0));
	cr_assert_null(strstr(s, "start_revision"), "0: from now");
	free(s);
}

Test(etcd, reading_kvs_back)
{
	/* As etcd 3.4.23 answers: strings for int64, value left out when "". */
	json_t *r = json_loads(
	    "{\"header\":{\"revision\":\"9\"},\"kvs\":[{\"key\":\"L2s=\","
	    "\"create_revision\":\"3\",\"mod_revision\":\"8\",\"version\":\"2\","
	    "\"value\":\"NDI=\"}],\"count\":\"1\"}",
	    0, NULL);
	json_t *e = json_loads("{\"kvs\":[{\"key\":\"L2s=\",\"mod_revision\":\"4\"}]}",
			       0, NULL);
	json_t *none = json_loads("{\"header\":{\"revision\":\"9\"}}", 0, NULL);
	char *v = NULL;
	size_t n = 99;
	int64_t rev = 0;

	cr_assert_eq(etcd_kv_first(r, &v, &n, &rev), 1);
	cr_assert_str_eq(v, "42");
	cr_assert_eq(n, 2);
	cr_assert_eq(rev, 8);
	free(v);
	cr_assert_eq(etcd_kv_first(e, &v, &n, &rev), 1);
	cr_assert_eq(n, 0, "an empty value is left out");
	cr_assert_str_eq(v, "");
	free(v);
	cr_assert_eq(etcd_kv_first(none, &v, &n, &rev), 0, "missing: no kvs");
	json_decref(r);
	json_decref(e);
	json_decref(none);
}

Test(etcd, endpoint_lists)
{
	char urls[4][300], err[300];

	cr_assert_eq(etcd_parse_endpoints("h1:2379, h2 ,https://h3:2381/,"
					  "http://[::1]:4001",
					  0, urls, 4, err, sizeof(err)),
		     4, "%s", err);
	cr_assert_str_eq(urls[0], "http://h1:2379");
	cr_assert_str_eq(urls[1], "http://h2:2379", "default port");
	cr_assert_str_eq(urls[2], "https://h3:2381");
	cr_assert_str_eq(urls[3], "http://[::1]:4001");
	cr_assert_eq(etcd_parse_endpoints("10.0.0.1", 1, urls, 4, err,
					  sizeof(err)),
		     1);
	cr_assert_str_eq(urls[0], "https://10.0.0.1:2379", "protocol=https");
	cr_assert_eq(etcd_parse_endpoints("h1:2379,ftp://h2", 0, urls, 4, err,
					  sizeof(err)),
		     CRUN_EUSAGE);
	cr_assert(strstr(err, "'ftp://h2'"), "%s", err);
	cr_assert_eq(etcd_parse_endpoints("h1:99999", 0, urls, 4, err,
					  sizeof(err)),
		     CRUN_EUSAGE);
	cr_assert_eq(etcd_parse_endpoints("h1:x", 0, urls, 4, err, sizeof(err)),
		     CRUN_EUSAGE);
	cr_assert_eq(etcd_parse_endpoints(",", 0, urls, 4, err, sizeof(err)),
		     CRUN_EUSAGE);
	cr_assert_eq(etcd_parse_endpoints("a,b,c,d,e", 0, urls, 4, err,
					  sizeof(err)),
		     CRUN_EUSAGE);
	cr_assert(strstr(err, "at most 4"), "%s", err);
}

/* --- the etcd keys of --rdzv_conf --------------------------------------- */


Test(etcd, rdzv_conf_keys)
{
	struct crun_rdzv_conf c;
	char e[512] = "";

	memset(&c, 0, sizeof(c));
	cr_assert_eq(cfg_parse_rdzv_conf(
			 "etcd_prefix=/jobs,protocol=https,cacert=/ca.pem,"
			 "cert=/c.pem,key=/c.key,user=u,password_file=/pw,"
			 "lease_ttl=2.5",
			 &c, e, sizeof(e)),
		     0, "%s", e);
	cr_assert_str_eq(c.etcd_prefix, "/jobs");
	cr_assert_eq(c.https, 1);
	cr_assert_str_eq(c.cacert, "/ca.pem");
	cr_assert_str_eq(c.cert, "/c.pem");
	cr_assert_str_eq(c.key, "/c.key");
	cr_assert_str_eq(c.user, "u");
	cr_assert_str_eq(c.password_file, "/pw");
	cr_assert_float_eq(c.lease_ttl, 2.5, 1e-9);
	/* torchrun's etcd-v2 names for the TLS files work too. */
	cr_assert_eq(cfg_parse_rdzv_conf("ca_cert=/a,ssl_cert=/b,ssl_cert_key=/k",
					 &c, e, sizeof(e)),
		     0, "%s", e);
	cr_assert_str_eq(c.cacert, "/a");
	cr_assert_str_eq(c.key, "/k");
	cfg_rdzv_conf_release(&c);
}

Test(etcd, rdzv_conf_bad_values)
{
	static const char *bad[] = {"protocol=ftp", "etcd_prefix=crun",
				    "lease_ttl=0", "lease_ttl=x"};

	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
		struct crun_rdzv_conf c;
		char e[512] = "";

		memset(&c, 0, sizeof(c));
		cr_assert_neq(cfg_parse_rdzv_conf(bad[i], &c, e, sizeof(e)), 0,
			      "'%s' accepted", bad[i]);
		cr_assert(strstr(e, "invalid value"), "%s: %s", bad[i], e);
		cfg_rdzv_conf_release(&c);
	}
}

Test(etcd, backoff_doubles_up_to_two_seconds)
{
	struct etcd_limits dflt = {0}, lim = {0};
	struct crun_rdzv_conf c;

	/* The defaults: rdzv_conf etcd_backoff=0.1, etcd_backoff_max=2. */
	cfg_rdzv_conf_init(&c);
	cfg_etcd_limits(&c, &dflt);
	cfg_rdzv_conf_release(&c);
	cr_assert_eq(etcd_backoff_ms(&dflt, 0), 100);
	cr_assert_eq(etcd_backoff_ms(&dflt, 1), 200);
	cr_assert_eq(etcd_backoff_ms(&dflt, 4), 1600);
	cr_assert_eq(etcd_backoff_ms(&dflt, 5), 2000);
	cr_assert_eq(etcd_backoff_ms(&dflt, 1000), 2000);
	/* rdzv_conf etcd_backoff, etcd_backoff_max */
	lim.backoff_ms = 30;
	lim.backoff_max_ms = 500;
	cr_assert_eq(etcd_backoff_ms(&lim, 0), 30);
	cr_assert_eq(etcd_backoff_ms(&lim, 2), 120);
	cr_assert_eq(etcd_backoff_ms(&lim, 4), 480);
	cr_assert_eq(etcd_backoff_ms(&lim, 5), 500);
	cr_assert_eq(etcd_backoff_ms(&lim, 1000), 500);
}

Test(etcd, json_nodes_counts_values_outside_strings)
{
	const char *j = "{\"a\":[{},{}],\"s\":\"{[\\\"{\"}";

	cr_assert_eq(etcd_json_nodes(j, strlen(j), 100), 5);
	cr_assert_eq(etcd_json_nodes("[{},{},{},{}]", 13, 2), 3,
		     "stops counting past stop");
	cr_assert_eq(etcd_json_nodes("\"[[[\"", 5, 100), 1);
}

Test(etcd, json_nodes_counts_scalars)
{
	const char *j = "[\"\",1,-2.5e+3,true,false,null,\"x\"]";
	const char *esc = "[\"a\\\\\",\"]\\\"[{\" , \"\\\\\\\"\"]";

	cr_assert_eq(etcd_json_nodes(j, strlen(j), 100), 8);
	cr_assert_eq(etcd_json_nodes("[\"\",\"\",\"\",\"\"]", 13, 2), 3,
		     "stops counting past stop");
	cr_assert_eq(etcd_json_nodes(" 42 ", 4, 100), 1);
	cr_assert_eq(etcd_json_nodes("[1 ,2\t,\n3]", 10, 100), 4);
	/* an object's keys are not values: each comes with one that is */
	cr_assert_eq(etcd_json_nodes("{\"k\" :\"v\",\"n\":0}", 16, 100), 3);
	/* escaped quotes and backslashes do not end or start strings */
	cr_assert_eq(etcd_json_nodes(esc, strlen(esc), 100), 4, "%s", esc);
}

Test(etcd, attempt_scales_with_the_lease)
{
	cr_assert_float_eq(rdzv_etcd_attempt(3), 0.75, 1e-9);
	cr_assert_float_eq(rdzv_etcd_attempt(10), 2.5, 1e-9);
	cr_assert_float_eq(rdzv_etcd_attempt(60), 3, 1e-9);
	cr_assert_float_eq(rdzv_etcd_attempt(1), 0.5, 1e-9);
}
