// Command drahealth watches a DRA driver's resource health stream the way a Kubernetes 1.37
// kubelet does: GetInfo on the registration socket, the first of the kubelet's health services
// that the driver lists (v1.DRAResourceHealth, then v1alpha1.DRAResourceHealth: the order of
// healthServicesSupportedByKubelet in pkg/kubelet/cm/dra/plugin/dra_plugin.go, v1.37.2), and
// for v1alpha1 the kubelet's own V1Alpha1ClientWrapper, so the rest sees v1 types only.
//
// Usage: drahealth REGISTRATION_SOCKET [SERVICE]. It prints the chosen service, then one JSON
// line per message ({"pool/device": "HEALTHY", ...}) until the stream ends or stdin closes.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	drahealthv1 "k8s.io/kubelet/pkg/apis/dra-health/v1"
	drahealthv1alpha1 "k8s.io/kubelet/pkg/apis/dra-health/v1alpha1"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

var healthServicesSupportedByKubelet = []string{
	drahealthv1.DRAResourceHealthService,
	drahealthv1alpha1.DRAResourceHealthService,
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "drahealth:", err)
		os.Exit(1)
	}
}

func run() error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _, _ = io.Copy(io.Discard, os.Stdin); cancel() }()

	reg, err := grpc.NewClient("unix:"+os.Args[1], grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer reg.Close()
	callCtx, callCancel := context.WithTimeout(ctx, 10*time.Second)
	defer callCancel()
	info, err := registerapi.NewRegistrationClient(reg).GetInfo(callCtx, &registerapi.InfoRequest{})
	if err != nil {
		return fmt.Errorf("GetInfo: %w", err)
	}
	chosen := ""
	if len(os.Args) > 2 {
		chosen = os.Args[2]
	} else {
		for _, service := range healthServicesSupportedByKubelet {
			if slices.Contains(info.SupportedVersions, service) {
				chosen = service
				break
			}
		}
	}
	fmt.Println(chosen)

	conn, err := grpc.NewClient("unix:"+info.Endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	var stream drahealthv1.DRAResourceHealth_NodeWatchResourcesClient
	switch chosen {
	case drahealthv1.DRAResourceHealthService:
		stream, err = drahealthv1.NewDRAResourceHealthClient(conn).NodeWatchResources(ctx, &drahealthv1.NodeWatchResourcesRequest{})
	case drahealthv1alpha1.DRAResourceHealthService:
		client := drahealthv1alpha1.NewDRAResourceHealthClient(conn)
		stream, err = drahealthv1.V1Alpha1ClientWrapper{Client: client}.NodeWatchResources(ctx, &drahealthv1.NodeWatchResourcesRequest{})
	default:
		return fmt.Errorf("no health service: %q", info.SupportedVersions)
	}
	if err != nil {
		return err
	}
	for {
		response, err := stream.Recv()
		if err != nil {
			if ctx.Err() != nil || err == io.EOF {
				return nil
			}
			return err
		}
		line := map[string]string{}
		for _, device := range response.GetDevices() {
			id := device.GetDevice()
			line[id.GetPoolName()+"/"+id.GetDeviceName()] = device.GetHealth().String()
		}
		out, _ := json.Marshal(line)
		fmt.Println(string(out))
	}
}
