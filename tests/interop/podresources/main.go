// Command podresources reads a kubelet's PodResources API v1 with the official client stubs of
// k8s.io/kubelet v0.36.3, as any consumer of the API does (NVIDIA's and Intel's exporters, the
// topology-aware scheduler's agent): List, GetAllocatableResources, and Get for each NS/NAME
// given.
//
// Usage: podresources SOCKET [NS/NAME ...]. It prints one JSON object: each answer as the stubs
// decoded it (protojson, proto field names), the bytes that came over the wire (base64, read a
// second time through a codec that keeps them), and Go's deterministic encoding of the decoded
// message; a failed call as its gRPC code and message. Equal raw and canonical bytes mean the
// server wrote exactly what Go's own encoder writes for that message.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	v1 "k8s.io/kubelet/pkg/apis/podresources/v1"
)

const maxMessage = 16 * 1024 * 1024 // the kubelet's e2e client: defaultPodResourcesMaxSize

// pace keeps the calls under the kubelet's rate limit (100 a second, bursts of 10): each call
// is made twice here, and a few Gets would otherwise use up the burst.
func pace() { time.Sleep(11 * time.Millisecond) }

// rawCodec hands over the bytes as received, so that they can be compared with an encoding.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) { return *(v.(*[]byte)), nil }
func (rawCodec) Unmarshal(data []byte, v any) error {
	*(v.(*[]byte)) = append([]byte(nil), data...)
	return nil
}
func (rawCodec) Name() string { return "proto" }

type answer struct {
	Response  json.RawMessage `json:"response,omitempty"`
	Raw       []byte          `json:"raw,omitempty"`
	Canonical []byte          `json:"canonical,omitempty"`
	Code      string          `json:"code,omitempty"`
	Message   string          `json:"message,omitempty"`
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: podresources SOCKET [NS/NAME ...]")
		os.Exit(2)
	}
	if err := run(os.Args[1], os.Args[2:]); err != nil {
		fmt.Fprintln(os.Stderr, "podresources:", err)
		os.Exit(1)
	}
}

func run(socket string, pods []string) error {
	conn, err := grpc.NewClient("unix:"+socket,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxMessage)))
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	client := v1.NewPodResourcesListerClient(conn)

	out := map[string]any{}
	list, err := client.List(ctx, &v1.ListPodResourcesRequest{})
	out["list"] = read(ctx, conn, "List", &v1.ListPodResourcesRequest{}, list, err, &v1.ListPodResourcesResponse{})
	pace()
	alloc, err := client.GetAllocatableResources(ctx, &v1.AllocatableResourcesRequest{})
	out["allocatable"] = read(ctx, conn, "GetAllocatableResources", &v1.AllocatableResourcesRequest{}, alloc, err,
		&v1.AllocatableResourcesResponse{})
	gets := map[string]answer{}
	for _, pod := range pods {
		namespace, name, _ := strings.Cut(pod, "/")
		request := &v1.GetPodResourcesRequest{PodNamespace: namespace, PodName: name}
		pace()
		got, err := client.Get(ctx, request)
		gets[pod] = read(ctx, conn, "Get", request, got, err, &v1.GetPodResourcesResponse{})
	}
	out["get"] = gets
	return json.NewEncoder(os.Stdout).Encode(out)
}

// read makes the answer of one call: the typed response (or its error), then the same call
// again for the raw bytes, decoded into empty and encoded deterministically.
func read(ctx context.Context, conn *grpc.ClientConn, method string, request proto.Message,
	response proto.Message, callErr error, empty proto.Message) answer {
	if callErr != nil {
		st := status.Convert(callErr)
		return answer{Code: st.Code().String(), Message: st.Message()}
	}
	typed, err := protojson.MarshalOptions{UseProtoNames: true}.Marshal(response)
	if err != nil {
		return answer{Code: "Internal", Message: err.Error()}
	}
	requestBytes, err := proto.Marshal(request)
	if err != nil {
		return answer{Code: "Internal", Message: err.Error()}
	}
	var raw []byte
	pace()
	if err := conn.Invoke(ctx, "/v1.PodResourcesLister/"+method, &requestBytes, &raw, grpc.ForceCodec(rawCodec{})); err != nil {
		st := status.Convert(err)
		return answer{Code: st.Code().String(), Message: st.Message()}
	}
	if err := proto.Unmarshal(raw, empty); err != nil {
		return answer{Code: "Internal", Message: err.Error()}
	}
	canonical, err := proto.MarshalOptions{Deterministic: true}.Marshal(empty)
	if err != nil {
		return answer{Code: "Internal", Message: err.Error()}
	}
	return answer{Response: typed, Raw: raw, Canonical: canonical}
}
