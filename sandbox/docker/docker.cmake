# The Docker driver and its gVisor flavour: the Docker Engine API over its
# unix socket with libcurl (docker-api.c), the container's body (driver-body.c),
# exec and archives (driver-exec.c), image pulls (driver-pull.c, image-pull.c),
# the collection of pulled images (driver-gc.c, image-gc.c), the bounded
# disk (disk.c), the image's volumes masked on it (volumes.c) and gVisor's
# resolver file (resolv.c).
target_sources(kiwi_sandbox PRIVATE
               ${CMAKE_CURRENT_LIST_DIR}/docker-api.c
               ${CMAKE_CURRENT_LIST_DIR}/docker-stream.c
               ${CMAKE_CURRENT_LIST_DIR}/disk.c
               ${CMAKE_CURRENT_LIST_DIR}/resolv.c
               ${CMAKE_CURRENT_LIST_DIR}/volumes.c
               ${CMAKE_CURRENT_LIST_DIR}/driver.c
               ${CMAKE_CURRENT_LIST_DIR}/driver-body.c
               ${CMAKE_CURRENT_LIST_DIR}/driver-exec.c
               ${CMAKE_CURRENT_LIST_DIR}/driver-pull.c
               ${CMAKE_CURRENT_LIST_DIR}/driver-gc.c
               ${CMAKE_CURRENT_LIST_DIR}/image-gc.c
               ${CMAKE_CURRENT_LIST_DIR}/image-pull.c)
