// Command topology-device-plugin is a TEST DOUBLE of a vendor's device plugin that reports the
// NUMA node of its devices (issue 43, docs/devices.md "Topology"). It exists because no plugin
// that reports topology can run on the emulated test hosts: the generic device plugin reports
// none, NVIDIA's and Intel's need their hardware (NVML, QAT, ...), the SR-IOV plugin's module is
// refused by the module proxy. It speaks the kubelet's real device plugin API (v1beta1, the
// module the kubelet itself is built from), so the kubelet's Topology Manager sees exactly what
// a real plugin's ListAndWatch would give it.
//
// It registers one resource with the kubelet whose registration socket is <dir>/kubelet.sock,
// advertises --devices healthy devices on NUMA node --numa-node, and answers Allocate with one
// environment variable naming the devices given, so a test can read them in the container. It
// does not re-register after a kubelet restart (a starting kubelet deletes its socket): the tests
// stop it before they restart a kubelet.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// AllocatedEnv is the environment variable Allocate sets: the IDs of the devices given, comma-separated.
const AllocatedEnv = "TOPOLOGY_DOUBLE_DEVICES"

type plugin struct {
	pluginapi.UnimplementedDevicePluginServer
	devices []*pluginapi.Device
}

func (p *plugin) GetDevicePluginOptions(context.Context, *pluginapi.Empty) (*pluginapi.DevicePluginOptions, error) {
	return &pluginapi.DevicePluginOptions{}, nil
}

// ListAndWatch sends the devices once and keeps the stream open: they never change.
func (p *plugin) ListAndWatch(_ *pluginapi.Empty, stream grpc.ServerStreamingServer[pluginapi.ListAndWatchResponse]) error {
	if err := stream.Send(&pluginapi.ListAndWatchResponse{Devices: p.devices}); err != nil {
		return err
	}
	<-stream.Context().Done()
	return nil
}

func (p *plugin) Allocate(_ context.Context, request *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
	response := &pluginapi.AllocateResponse{}
	for _, container := range request.ContainerRequests {
		log.Printf("allocated %v", container.DevicesIds)
		response.ContainerResponses = append(response.ContainerResponses, &pluginapi.ContainerAllocateResponse{
			Envs: map[string]string{AllocatedEnv: strings.Join(container.DevicesIds, ",")},
		})
	}
	return response, nil
}

func main() {
	dir := flag.String("dir", "", "the kubelet's device-plugins directory (its registration socket is kubelet.sock there)")
	resource := flag.String("resource", "", "the extended resource to advertise, e.g. numa-kubelets.test/topology")
	numaNode := flag.Int64("numa-node", 0, "the NUMA node every device reports")
	count := flag.Int("devices", 1, "how many devices to advertise")
	version := flag.Bool("version", false, "print what this program is and exit")
	flag.Parse()
	if *version {
		fmt.Println("topology-device-plugin (numa-kubelets test double), device plugin API", pluginapi.Version)
		return
	}
	if *dir == "" || !strings.Contains(*resource, "/") || *count < 1 {
		log.Fatal("usage: topology-device-plugin --dir DIR --resource DOMAIN/NAME --numa-node N [--devices COUNT]")
	}
	devices := make([]*pluginapi.Device, *count)
	for i := range devices {
		devices[i] = &pluginapi.Device{
			ID:       fmt.Sprintf("numa%d-device%d", *numaNode, i),
			Health:   pluginapi.Healthy,
			Topology: &pluginapi.TopologyInfo{Nodes: []*pluginapi.NUMANode{{ID: *numaNode}}},
		}
	}
	endpoint := "topology-double-" + strings.NewReplacer("/", "-", ".", "-").Replace(*resource) + ".sock"
	socket := filepath.Join(*dir, endpoint)
	if err := os.Remove(socket); err != nil && !os.IsNotExist(err) {
		log.Fatal(err)
	}
	listener, err := net.Listen("unix", socket)
	if err != nil {
		log.Fatal(err)
	}
	server := grpc.NewServer()
	pluginapi.RegisterDevicePluginServer(server, &plugin{devices: devices})
	go func() {
		if err := server.Serve(listener); err != nil {
			log.Fatal(err)
		}
	}()

	// The kubelet dials back to the endpoint as soon as it accepts the registration.
	conn, err := grpc.NewClient("unix://"+filepath.Join(*dir, "kubelet.sock"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	_, err = pluginapi.NewRegistrationClient(conn).Register(ctx, &pluginapi.RegisterRequest{
		Version:      pluginapi.Version,
		Endpoint:     endpoint,
		ResourceName: *resource,
	})
	cancel()
	conn.Close()
	if err != nil {
		log.Fatalf("registering %s with %s: %v", *resource, *dir, err)
	}
	log.Printf("registered %s: %d devices on NUMA node %d, endpoint %s", *resource, *count, *numaNode, socket)

	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	<-stop
	server.Stop()
	os.Remove(socket)
}
