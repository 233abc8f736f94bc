package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"net"
	"os"
	"path/filepath"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// script is what the client asks of the plugin after its first registration.
type script struct {
	Preferred []struct {
		Available   []string `json:"available"`
		MustInclude []string `json:"must_include"`
		Size        int32    `json:"size"`
	} `json:"preferred"`
	Allocate [][][]string `json:"allocate"` // requests -> containers -> device IDs
	PreStart [][]string   `json:"prestart"`
}

// registration is the kubelet's Registration service: like the real one, it dials the
// plugin's endpoint before Register returns, so a plugin that is not serving yet fails.
type registration struct {
	pluginapi.UnimplementedRegistrationServer
	dir   string
	conns chan *grpc.ClientConn
}

func (r *registration) Register(ctx context.Context, req *pluginapi.RegisterRequest) (*pluginapi.Empty, error) {
	emit("register", map[string]any{
		"version": req.Version, "endpoint": req.Endpoint, "resource_name": req.ResourceName,
		"options": optionsJSON(req.Options),
	})
	conn, err := dialUnix(ctx, filepath.Join(r.dir, req.Endpoint))
	if err != nil {
		emit("register_dial_failed", map[string]any{"error": err.Error()})
		return nil, err
	}
	select {
	case r.conns <- conn:
	default:
		conn.Close()
	}
	return &pluginapi.Empty{}, nil
}

func dialUnix(ctx context.Context, path string) (*grpc.ClientConn, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	//nolint:staticcheck // blocking dial, as the kubelet's device manager does
	return grpc.DialContext(ctx, path,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithBlock(),
		grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", addr)
		}))
}

// serveRegistration listens on <dir>/kubelet.sock, removing a stale socket first.
func serveRegistration(dir string, conns chan *grpc.ClientConn) *grpc.Server {
	sock := filepath.Join(dir, "kubelet.sock")
	if err := os.Remove(sock); err != nil && !errors.Is(err, os.ErrNotExist) {
		fail("remove %s: %v", sock, err)
	}
	ln, err := net.Listen("unix", sock)
	if err != nil {
		fail("listen %s: %v", sock, err)
	}
	srv := grpc.NewServer()
	pluginapi.RegisterRegistrationServer(srv, &registration{dir: dir, conns: conns})
	go srv.Serve(ln)
	return srv
}

func runClient(args []string) {
	fs := flag.NewFlagSet("client", flag.ExitOnError)
	dir := fs.String("dir", "", "plugin directory to serve kubelet.sock in")
	scriptJSON := fs.String("script", "{}", "JSON: preferred, allocate, prestart requests")
	timeout := fs.Duration("timeout", 30*time.Second, "give up after this long")
	fs.Parse(args)
	var sc script
	if err := json.Unmarshal([]byte(*scriptJSON), &sc); err != nil {
		fail("bad -script: %v", err)
	}
	conns := make(chan *grpc.ClientConn, 1)
	serveRegistration(*dir, conns)
	emit("serving", map[string]any{"socket": filepath.Join(*dir, "kubelet.sock")})
	select {
	case conn := <-conns:
		session(pluginapi.NewDevicePluginClient(conn), sc)
	case <-time.After(*timeout):
		fail("no registration within %s", *timeout)
	}
	time.AfterFunc(*timeout, func() { fail("timed out") })
	select {}
}

// session follows the kubelet: options, then ListAndWatch, then the scripted RPCs; the
// stream is read until it ends, each message reported.
func session(api pluginapi.DevicePluginClient, sc script) {
	ctx := context.Background()
	opts, err := api.GetDevicePluginOptions(ctx, &pluginapi.Empty{})
	if err != nil {
		fail("GetDevicePluginOptions: %v", err)
	}
	emit("options", optionsJSON(opts))
	stream, err := api.ListAndWatch(ctx, &pluginapi.Empty{})
	if err != nil {
		fail("ListAndWatch: %v", err)
	}
	first := make(chan struct{})
	go watch(stream, first)
	<-first
	for _, p := range sc.Preferred {
		req := &pluginapi.PreferredAllocationRequest{ContainerRequests: []*pluginapi.ContainerPreferredAllocationRequest{{
			AvailableDeviceIDs: p.Available, MustIncludeDeviceIDs: p.MustInclude, AllocationSize: p.Size,
		}}}
		resp, err := api.GetPreferredAllocation(ctx, req)
		emitResult("preferred", err, func() map[string]any {
			ids := [][]string{}
			for _, c := range resp.ContainerResponses {
				ids = append(ids, orEmptyList(c.DeviceIDs))
			}
			return map[string]any{"container_responses": ids}
		})
	}
	for _, containers := range sc.Allocate {
		req := &pluginapi.AllocateRequest{}
		for _, ids := range containers {
			req.ContainerRequests = append(req.ContainerRequests, &pluginapi.ContainerAllocateRequest{DevicesIds: ids})
		}
		resp, err := api.Allocate(ctx, req)
		emitResult("allocate", err, func() map[string]any {
			out := []map[string]any{}
			for _, c := range resp.ContainerResponses {
				out = append(out, containerJSON(c))
			}
			return map[string]any{"container_responses": out}
		})
	}
	for _, ids := range sc.PreStart {
		_, err := api.PreStartContainer(ctx, &pluginapi.PreStartContainerRequest{DevicesIds: ids})
		emitResult("prestart", err, func() map[string]any { return map[string]any{} })
	}
	emit("script_done", map[string]any{})
}

func watch(stream pluginapi.DevicePlugin_ListAndWatchClient, first chan struct{}) {
	for n := 0; ; n++ {
		resp, err := stream.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) {
				emit("stream_end", map[string]any{"code": "OK"})
			} else {
				emit("stream_end", errorJSON(err))
			}
			if n == 0 {
				close(first)
			}
			return
		}
		emit("list", map[string]any{"devices": devicesJSON(resp.Devices)})
		if n == 0 {
			close(first)
		}
	}
}

func emitResult(event string, err error, ok func() map[string]any) {
	if err != nil {
		emit(event, map[string]any{"error": errorJSON(err)})
		return
	}
	emit(event, ok())
}

func orEmptyList(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
