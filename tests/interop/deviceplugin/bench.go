package main

import (
	"context"
	"flag"
	"strings"
	"time"

	"google.golang.org/grpc"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// runBenchAllocate registers the plugin like the kubelet (Registration, options, an open
// ListAndWatch), then times sequential Allocate calls for one container. The same binary
// measures every plugin, so the ratios compare servers, not clients.
func runBenchAllocate(args []string) {
	fs := flag.NewFlagSet("bench-allocate", flag.ExitOnError)
	dir := fs.String("dir", "", "plugin directory to serve kubelet.sock in")
	ids := fs.String("ids", "", "comma-separated device IDs per Allocate (default: the first device)")
	n := fs.Int("n", 2000, "timed calls")
	warmup := fs.Int("warmup", 200, "untimed calls first")
	idle := fs.Duration("idle", 0, "after registering, leave the plugin idle this long (RSS is read then)")
	timeout := fs.Duration("timeout", 60*time.Second, "give up after this long")
	fs.Parse(args)
	time.AfterFunc(*timeout, func() { fail("bench-allocate timed out") })

	conns := make(chan *grpc.ClientConn, 1)
	serveRegistration(*dir, conns)
	emit("serving", map[string]any{})
	api := pluginapi.NewDevicePluginClient(<-conns)
	ctx := context.Background()
	if _, err := api.GetDevicePluginOptions(ctx, &pluginapi.Empty{}); err != nil {
		fail("GetDevicePluginOptions: %v", err)
	}
	stream, err := api.ListAndWatch(ctx, &pluginapi.Empty{})
	if err != nil {
		fail("ListAndWatch: %v", err)
	}
	first, err := stream.Recv()
	if err != nil || len(first.Devices) == 0 {
		fail("ListAndWatch gave no devices: %v", err)
	}
	emit("registered", map[string]any{"devices": len(first.Devices)})
	if *idle > 0 {
		time.Sleep(*idle)
		emit("idle", map[string]any{})
		time.Sleep(*idle / 4)
	}
	request := []string{first.Devices[0].ID}
	if *ids != "" {
		request = strings.Split(*ids, ",")
	}
	req := &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: request}}}
	latencies := make([]float64, 0, *n)
	for i := 0; i < *warmup+*n; i++ {
		t0 := time.Now()
		if _, err := api.Allocate(ctx, req); err != nil {
			fail("Allocate: %v", err)
		}
		if i >= *warmup {
			latencies = append(latencies, float64(time.Since(t0).Nanoseconds())/1000)
		}
	}
	emit("allocate_latency_us", map[string]any{"samples": latencies})
}
