/*
 * fc-api.c: the Firecracker HTTP API over a unix socket with libcurl (see
 * fc-api.h).
 */
#include "sandbox/firecracker/fc-api.h"

#include <curl/curl.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"

struct kiwi_fc_api {
    CURL *curl;
    char *socket_path;
};

int
kiwi_fc_api_open (const char *socket_path, kiwi_fc_api **out, kiwi_error_t *err)
{
    kiwi_fc_api *a = calloc (1, sizeof *a);
    if (a == NULL || (a->socket_path = strdup (socket_path)) == NULL || (a->curl = curl_easy_init ()) == NULL) {
        kiwi_fc_api_close (a);
        return kiwi_error_make (err, ENOMEM, "Firecracker API client for %s", socket_path);
    }
    *out = a;
    return 0;
}

void
kiwi_fc_api_close (kiwi_fc_api *a)
{
    if (a == NULL)
        return;
    if (a->curl)
        curl_easy_cleanup (a->curl);
    free (a->socket_path);
    free (a);
}

static size_t
collect (char *ptr, size_t size, size_t nmemb, void *ud)
{
    size_t n = size * nmemb;
    return kiwi_buf_append (ud, ptr, n, NULL) < 0 ? 0 : n;
}

int
kiwi_fc_api_call (kiwi_fc_api *a, const char *method, const char *path, json_t *body, long timeout_ms,
                  json_t **out, long *status, char **fault, kiwi_error_t *err)
{
    if (out)
        *out = NULL;
    if (fault)
        *fault = NULL;
    char url[1024];
    snprintf (url, sizeof url, "http://localhost%s", path);
    char *payload = body ? json_dumps (body, JSON_COMPACT) : NULL;
    if (body && payload == NULL)
        return kiwi_error_make (err, ENOMEM, "Firecracker %s %s", method, path);
    CURL *c = a->curl;
    curl_easy_reset (c);
    curl_easy_setopt (c, CURLOPT_UNIX_SOCKET_PATH, a->socket_path);
    curl_easy_setopt (c, CURLOPT_URL, url);
    curl_easy_setopt (c, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt (c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt (c, CURLOPT_TIMEOUT_MS, timeout_ms > 0 ? timeout_ms : 0L);
    curl_easy_setopt (c, CURLOPT_CONNECTTIMEOUT_MS, 5000L);
    struct curl_slist *h = NULL;
    h = curl_slist_append (h, "Accept: application/json");
    if (payload)
        h = curl_slist_append (h, "Content-Type: application/json");
    h = curl_slist_append (h, "Expect:");
    curl_easy_setopt (c, CURLOPT_HTTPHEADER, h);
    if (payload) {
        curl_easy_setopt (c, CURLOPT_POSTFIELDS, payload);
        curl_easy_setopt (c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t) strlen (payload));
    }
    kiwi_buf b;
    kiwi_buf_init (&b, 1u << 20); /* Firecracker's answers are small; anything else is not Firecracker */
    curl_easy_setopt (c, CURLOPT_WRITEFUNCTION, collect);
    curl_easy_setopt (c, CURLOPT_WRITEDATA, &b);
    CURLcode rc = curl_easy_perform (c);
    curl_slist_free_all (h);
    free (payload);
    if (rc != CURLE_OK) {
        kiwi_buf_free (&b);
        return kiwi_error_make_code (err, (int) rc, "Firecracker %s %s via %s: %s", method, path, a->socket_path,
                                     curl_easy_strerror (rc));
    }
    long st = 0;
    curl_easy_getinfo (c, CURLINFO_RESPONSE_CODE, &st);
    if (status)
        *status = st;
    json_error_t je;
    json_t *j = b.len ? json_loadb (b.data, b.len, 0, &je) : NULL;
    int ret = 0;
    if (st < 200 || st >= 300) {
        const char *fm = json_string_value (json_object_get (j, "fault_message"));
        const char *msg = fm ? fm : kiwi_buf_str (&b);
        if (fault)
            *fault = strdup (msg);
        ret = kiwi_error_make_code (err, KIWI_FC_API_HTTP, "Firecracker %s %s: HTTP %ld: %s", method, path, st,
                                    *msg ? msg : "(no fault message)");
        json_decref (j);
    } else if (out)
        *out = j;
    else
        json_decref (j);
    kiwi_buf_free (&b);
    return ret;
}

json_t *
kiwi_fc_body_machine_config (int vcpu_count, int64_t mem_size_mib)
{
    return json_pack ("{s:i,s:I,s:b}", "vcpu_count", vcpu_count, "mem_size_mib", (json_int_t) mem_size_mib, "smt", 0);
}

json_t *
kiwi_fc_body_boot_source (const char *kernel_image_path, const char *initrd_path, const char *boot_args)
{
    json_t *j = json_pack ("{s:s,s:s}", "kernel_image_path", kernel_image_path, "boot_args", boot_args);
    if (j && initrd_path && *initrd_path)
        json_object_set_new (j, "initrd_path", json_string (initrd_path));
    return j;
}

json_t *
kiwi_fc_body_drive (const char *drive_id, const char *path_on_host, bool is_root_device, bool is_read_only)
{
    return json_pack ("{s:s,s:s,s:b,s:b}", "drive_id", drive_id, "path_on_host", path_on_host, "is_root_device",
                      is_root_device, "is_read_only", is_read_only);
}

json_t *
kiwi_fc_body_vsock (uint32_t guest_cid, const char *uds_path)
{
    return json_pack ("{s:I,s:s}", "guest_cid", (json_int_t) guest_cid, "uds_path", uds_path);
}

json_t *
kiwi_fc_body_network_interface (const char *iface_id, const char *host_dev_name, const char *guest_mac)
{
    json_t *j = json_pack ("{s:s,s:s}", "iface_id", iface_id, "host_dev_name", host_dev_name);
    if (j && guest_mac && *guest_mac)
        json_object_set_new (j, "guest_mac", json_string (guest_mac));
    return j;
}

json_t *
kiwi_fc_body_action (const char *action_type)
{
    return json_pack ("{s:s}", "action_type", action_type);
}
