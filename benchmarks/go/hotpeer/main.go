// Command hotpeer is benchmarks/hotplug.py's Go peer: a minimal device plugin that re-lists a
// directory on every fsnotify event, the fastest a Go plugin reacts to hotplug.
package main

import (
	"context"
	"flag"
	"net"
	"os"
	"path/filepath"
	"sort"
	"sync"

	"github.com/fsnotify/fsnotify"
	"google.golang.org/grpc"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

type plugin struct {
	pluginapi.UnimplementedDevicePluginServer
	dir, pattern string
	mu           sync.Mutex
	devices      []*pluginapi.Device
	changed      chan struct{}
}

func (p *plugin) rescan() {
	entries, _ := os.ReadDir(p.dir)
	var devices []*pluginapi.Device
	for _, e := range entries {
		if ok, _ := filepath.Match(p.pattern, e.Name()); ok {
			devices = append(devices, &pluginapi.Device{ID: e.Name(), Health: pluginapi.Healthy})
		}
	}
	sort.Slice(devices, func(i, j int) bool { return devices[i].ID < devices[j].ID })
	p.mu.Lock()
	p.devices = devices
	close(p.changed)
	p.changed = make(chan struct{})
	p.mu.Unlock()
}

func (p *plugin) GetDevicePluginOptions(context.Context, *pluginapi.Empty) (*pluginapi.DevicePluginOptions, error) {
	return &pluginapi.DevicePluginOptions{}, nil
}

func (p *plugin) ListAndWatch(_ *pluginapi.Empty, stream pluginapi.DevicePlugin_ListAndWatchServer) error {
	for {
		p.mu.Lock()
		devices, changed := p.devices, p.changed
		p.mu.Unlock()
		if err := stream.Send(&pluginapi.ListAndWatchResponse{Devices: devices}); err != nil {
			return err
		}
		select {
		case <-changed:
		case <-stream.Context().Done():
			return nil
		}
	}
}

func main() {
	dir := flag.String("dir", "", "directory to watch")
	pattern := flag.String("pattern", "*", "file name glob")
	socket := flag.String("socket", "", "unix socket to serve on")
	flag.Parse()
	p := &plugin{dir: *dir, pattern: *pattern, changed: make(chan struct{})}
	watcher, err := fsnotify.NewWatcher()
	if err != nil {
		panic(err)
	}
	if err := watcher.Add(*dir); err != nil {
		panic(err)
	}
	p.rescan()
	go func() {
		for range watcher.Events {
			p.rescan()
		}
	}()
	listener, err := net.Listen("unix", *socket)
	if err != nil {
		panic(err)
	}
	server := grpc.NewServer()
	pluginapi.RegisterDevicePluginServer(server, p)
	_ = server.Serve(listener)
}
