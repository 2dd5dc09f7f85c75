/*
 * libcurl's multi_socket interface driven by a libuv loop (the shape of
 * curl's docs/examples/multi-uv.c): curl's socket callback starts and stops
 * a uv_poll_t per socket, its timer callback a uv_timer_t, and finished
 * transfers are collected with curl_multi_info_read. Nothing blocks the loop.
 */
#ifndef CRUN_CURL_UV_H
#define CRUN_CURL_UV_H

#include <curl/curl.h>
#include <uv.h>

struct curl_uv;

/** A transfer ended: result is curl's code (CURLE_OK: see the response). */
typedef void (*curl_uv_done_cb)(CURL *easy, CURLcode result, void *arg);
typedef void (*curl_uv_close_cb)(void *data);

int curl_uv_new(uv_loop_t *loop, struct curl_uv **out);

/**
 * Start easy (configured by the caller, who keeps owning it). done runs
 * exactly once, from the loop, unless this returns an error or the
 * transfer is taken back with curl_uv_remove first.
 */
int curl_uv_add(struct curl_uv *cu, CURL *easy, curl_uv_done_cb done,
		void *arg);

/** Take a running transfer back: its done callback will not run. */
void curl_uv_remove(struct curl_uv *cu, CURL *easy);

/**
 * Stop every transfer (their done callbacks do not run), close the
 * handles; cb runs once everything is closed, then free with curl_uv_free.
 */
void curl_uv_close(struct curl_uv *cu, curl_uv_close_cb cb, void *data);
void curl_uv_free(struct curl_uv *cu);

#endif
