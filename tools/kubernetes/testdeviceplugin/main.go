// Command test-device-plugin is a device plugin for the tests: it serves the kubelet's device
// plugin API (v1beta1) on a socket in the given device-plugins directory, registers with the
// kubelet.sock there, and advertises a number of healthy devices of one extended resource.
// Allocate hands out nothing (no device nodes, no mounts): the tests only ask whether the
// resource shows up on the right Node, which tells which kubelet's directory it registered in.
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	deviceplugin "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

type plugin struct {
	deviceplugin.UnimplementedDevicePluginServer
	devices []*deviceplugin.Device
}

func (p *plugin) GetDevicePluginOptions(context.Context, *deviceplugin.Empty) (*deviceplugin.DevicePluginOptions, error) {
	return &deviceplugin.DevicePluginOptions{}, nil
}

func (p *plugin) ListAndWatch(_ *deviceplugin.Empty, stream grpc.ServerStreamingServer[deviceplugin.ListAndWatchResponse]) error {
	if err := stream.Send(&deviceplugin.ListAndWatchResponse{Devices: p.devices}); err != nil {
		return err
	}
	<-stream.Context().Done() // the devices never change
	return nil
}

func (p *plugin) Allocate(_ context.Context, request *deviceplugin.AllocateRequest) (*deviceplugin.AllocateResponse, error) {
	response := &deviceplugin.AllocateResponse{}
	for range request.ContainerRequests {
		response.ContainerResponses = append(response.ContainerResponses, &deviceplugin.ContainerAllocateResponse{})
	}
	return response, nil
}

func main() {
	dir := flag.String("dir", deviceplugin.DevicePluginPath, "the kubelet's device-plugins directory")
	resource := flag.String("resource", "numa-kubelets.io/test-device", "extended resource name")
	count := flag.Int("devices", 2, "number of devices to advertise")
	flag.Parse()

	endpoint := "numa-kubelets-test.sock"
	socket := filepath.Join(*dir, endpoint)
	_ = os.Remove(socket)
	listener, err := net.Listen("unix", socket)
	if err != nil {
		fail("listen on %s: %v", socket, err)
	}
	served := &plugin{}
	for i := range *count {
		served.devices = append(served.devices, &deviceplugin.Device{ID: fmt.Sprintf("test-%d", i), Health: deviceplugin.Healthy})
	}
	server := grpc.NewServer()
	deviceplugin.RegisterDevicePluginServer(server, served)
	go func() {
		if err := server.Serve(listener); err != nil {
			fail("serve: %v", err)
		}
	}()

	connection, err := grpc.NewClient("unix://"+filepath.Join(*dir, "kubelet.sock"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		fail("kubelet.sock: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err = deviceplugin.NewRegistrationClient(connection).Register(ctx, &deviceplugin.RegisterRequest{
		Version:      deviceplugin.Version,
		Endpoint:     endpoint,
		ResourceName: *resource,
	})
	if err != nil {
		fail("register with %s: %v", filepath.Join(*dir, "kubelet.sock"), err)
	}
	fmt.Printf("registered %s (%d devices) with %s\n", *resource, *count, *dir)
	select {} // serve until stopped
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "test-device-plugin: "+format+"\n", args...)
	os.Exit(1)
}
