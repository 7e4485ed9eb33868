#!/bin/sh
# Installs the numa-kubelets CRI TEST CLIENT into the test host's root file system (run by
# customize_rootfs.sh while the image is built): $1 is the root file system, $2 this directory.
# The gRPC code is generated inside the root file system, by its own grpcio-tools, so it matches
# the protobuf runtime the client runs with there.
set -eu
root="$1"
source_dir="$2"
lib=/usr/local/lib/numa-kubelets-cri-test-client

install -d "$root$lib" "$root$lib/images"
for file in runtime_v1_subset.proto kubelet_side.py cri_test_client.py build_test_images.py; do
    install -m 644 "$source_dir/$file" "$root$lib/$file"
done
chmod 755 "$root$lib/cri_test_client.py"
chroot "$root" python3 -m grpc_tools.protoc -I "$lib" --python_out="$lib" --grpc_python_out="$lib" \
    "$lib/runtime_v1_subset.proto"
chroot "$root" python3 "$lib/build_test_images.py" /bin/busybox "$lib/images"
ln -sf "$lib/cri_test_client.py" "$root/usr/local/bin/numa-kubelets-cri-test-client"

# containerd looks for CNI plugins in /opt/cni/bin (its default bin_dir, where upstream CNI
# releases and the CNI agents' installers put them); Debian installs them to /usr/lib/cni.
install -d "$root/opt/cni"
ln -sfn /usr/lib/cni "$root/opt/cni/bin"
