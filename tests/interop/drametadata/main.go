// Command drametadata is the Go side of kubedevice's device-metadata differential test
// (tests/interop/test_dra_metadata_go.py), on k8s.io/dynamic-resource-allocation v0.37.2.
//
//	drametadata decode FILE...   each file through devicemetadata.DecodeMetadataFromStream: one JSON line per file
//	drametadata serve CONFIG     kubeletplugin.Start with EnableDeviceMetadata, until stdin closes
//
// decode prints, per file, the decoded object in every registered version, the version it was
// decoded from, the validation result, and the stream re-encoded for the versions it holds
// exactly as the helper's metadata writer encodes (the PrettySerializer, one object per version,
// each followed by a newline), so a test can compare a file byte for byte with what the Go
// writer makes of its content.
//
// serve runs the helper with a client of a tiny API server (net/http/httptest) that answers GETs
// of CONFIG's claims (client-go's fake clientset would double the build); the driver behind it
// answers PrepareResourceClaims with one device per allocated device of its driver (all the
// requests that name it, the attributes CONFIG gives, and the CDI ID kubedevice gives the
// device in its own per-claim spec, which the stub writes too), so the kubelet side (the
// test's kubelet client, or check --dra, over the real sockets) sees what the helper adds for
// device metadata.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	runtimeserializer "k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/dynamic-resource-allocation/api/metadata"
	"k8s.io/dynamic-resource-allocation/api/metadata/install"
	metadatav1alpha1 "k8s.io/dynamic-resource-allocation/api/metadata/v1alpha1"
	metadatav1beta1 "k8s.io/dynamic-resource-allocation/api/metadata/v1beta1"
	"k8s.io/dynamic-resource-allocation/devicemetadata"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
)

func main() {
	if len(os.Args) < 2 {
		fail(fmt.Errorf("usage: drametadata decode FILE... | serve CONFIG"))
	}
	var err error
	switch os.Args[1] {
	case "decode":
		err = decodeFiles(os.Args[2:])
	case "serve":
		if len(os.Args) != 3 {
			err = fmt.Errorf("serve takes one CONFIG file")
		} else {
			err = serve(os.Args[2])
		}
	default:
		err = fmt.Errorf("unknown mode %q", os.Args[1])
	}
	if err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "drametadata:", err)
	os.Exit(1)
}

// --- decode ---------------------------------------------------------------------------------

type decoded struct {
	File       string          `json:"file"`
	Error      string          `json:"error,omitempty"`
	From       string          `json:"from,omitempty"`
	Validation string          `json:"validation,omitempty"`
	V1beta1    json.RawMessage `json:"v1beta1,omitempty"`
	V1alpha1   json.RawMessage `json:"v1alpha1,omitempty"`
	Versions   []string        `json:"versions,omitempty"`
	Reencoded  string          `json:"reencoded,omitempty"`
}

func decodeFiles(paths []string) error {
	out := json.NewEncoder(os.Stdout)
	for _, path := range paths {
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if err := out.Encode(decodeOne(path, data)); err != nil {
			return err
		}
	}
	return nil
}

func decodeOne(path string, data []byte) decoded {
	result := decoded{File: path}
	var internal metadata.DeviceMetadata
	var gvk schema.GroupVersionKind
	var invalid error
	err := devicemetadata.DecodeMetadataFromStream(
		json.NewDecoder(bytes.NewReader(data)), &internal,
		devicemetadata.DecodeMetadataStoreGVKResult(&gvk),
		devicemetadata.DecodeMetadataWithValidationResult(&invalid),
	)
	if err != nil {
		result.Error = err.Error()
		return result
	}
	result.From = gvk.GroupVersion().String()
	if invalid != nil {
		result.Validation = invalid.Error()
	}
	var beta metadatav1beta1.DeviceMetadata
	var alpha metadatav1alpha1.DeviceMetadata
	for _, dest := range []struct {
		obj runtime.Object
		out *json.RawMessage
	}{{&beta, &result.V1beta1}, {&alpha, &result.V1alpha1}} {
		if err := devicemetadata.DecodeMetadataFromStream(json.NewDecoder(bytes.NewReader(data)), dest.obj); err != nil {
			result.Error = err.Error()
			return result
		}
		*dest.out, _ = json.Marshal(dest.obj)
	}
	versions, err := streamVersions(data)
	if err != nil {
		result.Error = err.Error()
		return result
	}
	for _, gv := range versions {
		result.Versions = append(result.Versions, gv.String())
	}
	reencoded, err := encodeStream(&internal, versions)
	if err != nil {
		result.Error = err.Error()
		return result
	}
	result.Reencoded = string(reencoded)
	return result
}

// streamVersions lists the apiVersion of each object in the stream, in order.
func streamVersions(data []byte) ([]schema.GroupVersion, error) {
	var versions []schema.GroupVersion
	decoder := json.NewDecoder(bytes.NewReader(data))
	for decoder.More() {
		var head struct {
			APIVersion string `json:"apiVersion"`
		}
		if err := decoder.Decode(&head); err != nil {
			return nil, err
		}
		gv, err := schema.ParseGroupVersion(head.APIVersion)
		if err != nil {
			return nil, err
		}
		versions = append(versions, gv)
	}
	return versions, nil
}

// encodeStream is kubeletplugin's metadataWriter.encodeMetadataStream (unexported there):
// the scheme of api/metadata/install, its pretty JSON serializer, one object per version,
// each followed by a newline.
func encodeStream(dm *metadata.DeviceMetadata, versions []schema.GroupVersion) ([]byte, error) {
	scheme := install.NewScheme()
	codecs := runtimeserializer.NewCodecFactory(scheme)
	info, ok := runtime.SerializerInfoForMediaType(codecs.SupportedMediaTypes(), runtime.ContentTypeJSON)
	if !ok {
		return nil, fmt.Errorf("no JSON serializer")
	}
	var buf bytes.Buffer
	for _, gv := range versions {
		data, err := runtime.Encode(codecs.EncoderForVersion(info.PrettySerializer, gv), dm)
		if err != nil {
			return nil, err
		}
		buf.Write(data)
		buf.WriteByte('\n')
	}
	return buf.Bytes(), nil
}

// --- serve ----------------------------------------------------------------------------------

type serveConfig struct {
	Driver       string            `json:"driver"`
	PluginDir    string            `json:"pluginDir"`
	RegistrarDir string            `json:"registrarDir"`
	CDIDir       string            `json:"cdiDir"`
	Versions     []string          `json:"versions"`
	Claims       []json.RawMessage `json:"claims"` // resource.k8s.io/v1 ResourceClaims
	// Attributes of each device, by its name.
	Attributes map[string]map[string]resourceapi.DeviceAttribute `json:"attributes"`
}

func serve(path string) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var config serveConfig
	if err := json.Unmarshal(raw, &config); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	var versions []schema.GroupVersion
	for _, v := range config.Versions {
		versions = append(versions, schema.GroupVersion{Group: metadata.GroupName, Version: v})
	}
	server, err := claimServer(config.Claims)
	if err != nil {
		return err
	}
	defer server.Close()
	client, err := kubernetes.NewForConfig(&rest.Config{Host: server.URL})
	if err != nil {
		return err
	}
	for _, dir := range []string{config.PluginDir, config.CDIDir} { // a driver's own: the helper expects them
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	helper, err := kubeletplugin.Start(ctx, &driver{config: config},
		kubeletplugin.DriverName(config.Driver),
		kubeletplugin.KubeClient(client),
		kubeletplugin.PluginDataDirectoryPath(config.PluginDir),
		kubeletplugin.RegistrarDirectoryPath(config.RegistrarDir),
		kubeletplugin.CDIDirectory(config.CDIDir),
		kubeletplugin.EnableDeviceMetadata(len(versions) > 0, versions), // no versions: off (the benchmark's baseline)
		kubeletplugin.HealthService(false),                              // the stub reports no health
	)
	if err != nil {
		return err
	}
	fmt.Println("serving")
	_, _ = io.Copy(io.Discard, bufio.NewReader(os.Stdin)) // until the test closes stdin
	helper.Stop()
	return nil
}

// claimServer answers GET /apis/resource.k8s.io/v1/namespaces/NS/resourceclaims/NAME with the
// claim as given, anything else with a NotFound status.
func claimServer(claims []json.RawMessage) (*httptest.Server, error) {
	byPath := map[string][]byte{}
	for _, raw := range claims {
		var claim resourceapi.ResourceClaim
		if err := json.Unmarshal(raw, &claim); err != nil {
			return nil, err
		}
		byPath[fmt.Sprintf("/apis/resource.k8s.io/v1/namespaces/%s/resourceclaims/%s", claim.Namespace, claim.Name)] = raw
	}
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if body, ok := byPath[r.URL.Path]; ok && r.Method == http.MethodGet {
			_, _ = w.Write(body)
			return
		}
		w.WriteHeader(http.StatusNotFound)
		_, _ = fmt.Fprintf(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404,"message":"%s not found"}`, r.URL.Path)
	})), nil
}

type driver struct {
	config serveConfig
}

// PrepareResourceClaims: per claim, one device per allocated device of this driver, in the
// order of the allocation results, with every request (subrequest included) that names it.
func (d *driver) PrepareResourceClaims(_ context.Context, claims []*resourceapi.ResourceClaim) (map[types.UID]kubeletplugin.PrepareResult, error) {
	result := make(map[types.UID]kubeletplugin.PrepareResult, len(claims))
	for _, claim := range claims {
		var devices []kubeletplugin.Device
		index := map[string]int{}
		for _, r := range claim.Status.Allocation.Devices.Results {
			if r.Driver != d.config.Driver {
				continue
			}
			if i, ok := index[r.Device]; ok {
				devices[i].Requests = append(devices[i].Requests, r.Request)
				continue
			}
			index[r.Device] = len(devices)
			devices = append(devices, kubeletplugin.Device{
				Requests:     []string{r.Request},
				PoolName:     r.Pool,
				DeviceName:   r.Device,
				CDIDeviceIDs: []string{fmt.Sprintf("k8s.%s/device=%s-%s", d.config.Driver, claim.UID, r.Device)},
				Metadata:     &kubeletplugin.DeviceMetadata{Attributes: d.config.Attributes[r.Device]},
			})
		}
		if err := d.writeSpec(claim.UID, devices); err != nil {
			result[claim.UID] = kubeletplugin.PrepareResult{Err: err}
			continue
		}
		result[claim.UID] = kubeletplugin.PrepareResult{Devices: devices}
	}
	return result, nil
}

// writeSpec defines the devices' own CDI IDs (an env variable each), one spec per claim.
func (d *driver) writeSpec(uid types.UID, devices []kubeletplugin.Device) error {
	var entries []map[string]any
	for _, device := range devices {
		name := string(uid) + "-" + device.DeviceName
		entries = append(entries, map[string]any{"name": name, "containerEdits": map[string]any{"env": []string{"DEVICE=" + name}}})
	}
	if len(entries) == 0 {
		return nil
	}
	data, err := json.Marshal(map[string]any{"cdiVersion": "0.5.0", "kind": "k8s." + d.config.Driver + "/device", "devices": entries})
	if err != nil {
		return err
	}
	return os.WriteFile(d.specPath(uid), data, 0o644)
}

func (d *driver) specPath(uid types.UID) string {
	return filepath.Join(d.config.CDIDir, "drametadata-"+string(uid)+".json")
}

func (d *driver) UnprepareResourceClaims(_ context.Context, claims []kubeletplugin.NamespacedObject) (map[types.UID]error, error) {
	result := make(map[types.UID]error, len(claims))
	for _, claim := range claims {
		if err := os.Remove(d.specPath(claim.UID)); err != nil && !os.IsNotExist(err) {
			result[claim.UID] = err
			continue
		}
		result[claim.UID] = nil
	}
	return result, nil
}

func (d *driver) HandleError(_ context.Context, err error, msg string) {
	fmt.Fprintln(os.Stderr, "drametadata:", msg, err)
}

func (d *driver) WatchHealthStatus(context.Context, chan<- kubeletplugin.DeviceHealthReport) error {
	return kubeletplugin.ErrHealthNotSupported
}
