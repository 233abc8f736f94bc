// Command stubplugin serves the kubelet's own Go device plugin stub (the one behind the
// Kubernetes sample plugin) with N devices that each grant /dev/null, like kubedevice's
// examples/null.yaml: the Go peer of benchmarks/side_by_side.py with the same device set
// and the same answers. It is a separate binary so that its RSS is that of a plugin.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"k8s.io/klog/v2"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	dpstub "k8s.io/kubernetes/pkg/kubelet/cm/devicemanager/plugin/v1beta1"
)

func main() {
	fs := flag.NewFlagSet("stubplugin", flag.ExitOnError)
	dir := fs.String("dir", "", "plugin directory (kubelet.sock is served there)")
	resource := fs.String("resource", "example.com/null", "extended resource name")
	count := fs.Int("devices", 4, "devices to advertise")
	fs.Parse(os.Args[1:])

	var devs []*pluginapi.Device
	for i := 0; i < *count; i++ {
		devs = append(devs, &pluginapi.Device{ID: fmt.Sprintf("null-%d", i), Health: pluginapi.Healthy})
	}
	ctx := context.Background()
	kubeletSock := filepath.Join(*dir, "kubelet.sock")
	stub := dpstub.NewDevicePluginStub(klog.Background(), devs, filepath.Join(*dir, "go-stub.sock"), *resource, false, false)
	stub.SetAllocFunc(grantDevNull)
	if err := stub.Start(ctx); err != nil {
		klog.Fatalf("stub Start: %v", err)
	}
	if err := stub.Register(ctx, kubeletSock, *resource, *dir); err != nil {
		klog.Fatalf("stub Register: %v", err)
	}
	go stub.Watch(ctx, kubeletSock, *resource, *dir)
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM)
	<-signals
	stub.Stop(klog.Background())
}

func grantDevNull(r *pluginapi.AllocateRequest, devs map[string]*pluginapi.Device) (*pluginapi.AllocateResponse, error) {
	resp := &pluginapi.AllocateResponse{}
	for _, req := range r.ContainerRequests {
		for _, id := range req.DevicesIds {
			if _, ok := devs[id]; !ok {
				return nil, fmt.Errorf("unknown device %s", id)
			}
		}
		resp.ContainerResponses = append(resp.ContainerResponses, &pluginapi.ContainerAllocateResponse{
			Devices: []*pluginapi.DeviceSpec{{ContainerPath: "/dev/null", HostPath: "/dev/null", Permissions: "rw"}},
		})
	}
	return resp, nil
}
