/*
 * fc-api.h: a small client for the Firecracker HTTP API over its unix
 * socket (the --api-sock of one Firecracker process), with libcurl
 * (CURLOPT_UNIX_SOCKET_PATH), and the request bodies Kiwi sends.
 *
 * The bodies follow Firecracker's published API description (swagger
 * `firecracker.yaml`, API 1.x): MachineConfiguration, BootSource, Drive,
 * Vsock, NetworkInterface, InstanceActionInfo. Each builder returns a new
 * jansson reference; the caller owns it.
 *
 * Threading: a kiwi_fc_api owns one curl easy handle; one user at a time.
 */
#ifndef KIWI_SANDBOX_FC_API_H
#define KIWI_SANDBOX_FC_API_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/error.h"

typedef struct kiwi_fc_api kiwi_fc_api;

/* Error code of an answer that is not 2xx (the status is in *status). */
#define KIWI_FC_API_HTTP (KIWI_ERR_RANGE_FC_API + 1)

/* Prepares a client for the socket at `socket_path` (nothing is sent).
 * *out is owned by the caller (kiwi_fc_api_close). */
int kiwi_fc_api_open (const char *socket_path, kiwi_fc_api **out, kiwi_error_t *err);
void kiwi_fc_api_close (kiwi_fc_api *a);

/* One request. `body` may be NULL (not stolen). On 2xx *out (if non-NULL)
 * receives the parsed body or NULL for an empty one. Any other status is
 * an error with code KIWI_FC_API_HTTP whose message quotes Firecracker's
 * `fault_message`; *fault (if non-NULL) receives a copy of that message
 * (caller frees). *status (if non-NULL) is set whenever an answer came.
 * A transport failure is an error with libcurl's code. */
int kiwi_fc_api_call (kiwi_fc_api *a, const char *method, const char *path, json_t *body, long timeout_ms,
                      json_t **out, long *status, char **fault, kiwi_error_t *err);

/* Request bodies. */
json_t *kiwi_fc_body_machine_config (int vcpu_count, int64_t mem_size_mib);
json_t *kiwi_fc_body_boot_source (const char *kernel_image_path, const char *initrd_path, const char *boot_args);
json_t *kiwi_fc_body_drive (const char *drive_id, const char *path_on_host, bool is_root_device, bool is_read_only);
json_t *kiwi_fc_body_vsock (uint32_t guest_cid, const char *uds_path);
json_t *kiwi_fc_body_network_interface (const char *iface_id, const char *host_dev_name, const char *guest_mac);
json_t *kiwi_fc_body_action (const char *action_type);

#endif
