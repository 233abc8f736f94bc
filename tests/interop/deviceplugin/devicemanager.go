package main

import (
	"context"
	"flag"
	"fmt"
	"sort"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	"k8s.io/kubernetes/pkg/kubelet/cm/containermap"
	"k8s.io/kubernetes/pkg/kubelet/cm/devicemanager"
	"k8s.io/kubernetes/pkg/kubelet/cm/topologymanager"
)

type allSourcesReady struct{}

func (allSourcesReady) AddSource(string) {}
func (allSourcesReady) AllReady() bool   { return true }

// dmHarness runs the kubelet's real device manager. NewManagerImpl hard-codes
// /var/lib/kubelet/device-plugins, so the caller runs this inside a private mount
// namespace with a temporary directory bound over that path.
type dmHarness struct {
	resource string
	devices  int
	healthy  int
	timeout  time.Duration
	pods     []*v1.Pod
	manager  *devicemanager.ManagerImpl
}

func runDeviceManager(args []string) {
	fs := flag.NewFlagSet("devicemanager", flag.ExitOnError)
	h := &dmHarness{}
	fs.StringVar(&h.resource, "resource", "", "extended resource name to wait for")
	fs.IntVar(&h.devices, "devices", 1, "devices the plugin advertises (node capacity)")
	fs.IntVar(&h.healthy, "healthy", -1, "healthy devices among them (node allocatable; default: all)")
	request := fs.Int("request", 1, "devices the test pod's container requests (0: no pod)")
	restarts := fs.Int("restarts", 1, "kubelet restarts to perform")
	restoredPod := fs.String("restored-pod", "", "UID of a pod that the checkpoint already holds: report its devices instead of admitting a pod")
	fs.DurationVar(&h.timeout, "timeout", 30*time.Second, "wait at most this long for each step")
	fs.Parse(args)
	if h.healthy < 0 {
		h.healthy = h.devices
	}

	if *restoredPod != "" {
		h.pods = append(h.pods, h.pod(*restoredPod, *request))
	}
	h.start()
	h.waitCapacity("capacity")
	if *restoredPod != "" {
		h.reportContainer("restored", h.pods[0])
	} else if *request > 0 {
		h.admit(*request)
	}
	for i := 0; i < *restarts; i++ {
		if err := h.manager.Stop(klog.Background()); err != nil {
			fail("stop device manager: %v", err)
		}
		h.start()
		h.waitCapacity("reregistered")
		for _, pod := range h.pods {
			h.reportContainer("restored", pod)
		}
	}
	h.manager.Stop(klog.Background())
	emit("done", map[string]any{})
}

func (h *dmHarness) start() {
	m, err := devicemanager.NewManagerImpl(nil, topologymanager.NewFakeManager())
	if err != nil {
		fail("NewManagerImpl: %v", err)
	}
	active := func() []*v1.Pod { return h.pods }
	if err := m.Start(klog.Background(), active, allSourcesReady{}, containermap.NewContainerMap(), sets.New[string]()); err != nil {
		fail("device manager Start: %v", err)
	}
	h.manager = m
	emit("kubelet_started", map[string]any{})
}

// waitCapacity polls GetCapacity as the kubelet's node status loop does, and reports
// how long after the manager started the resource reached its advertised counts.
func (h *dmHarness) waitCapacity(event string) {
	start := time.Now()
	deadline := start.Add(h.timeout)
	for {
		capacity, allocatable, _ := h.manager.GetCapacity()
		c, a := capacity[v1.ResourceName(h.resource)], allocatable[v1.ResourceName(h.resource)]
		if c.Value() == int64(h.devices) && a.Value() == int64(h.healthy) {
			emit(event, map[string]any{
				"elapsed_ms":  float64(time.Since(start).Microseconds()) / 1000,
				"capacity":    c.Value(),
				"allocatable": a.Value(),
				"devices":     h.allocatableDevices(),
			})
			return
		}
		if time.Now().After(deadline) {
			fail("%s: %s capacity %d allocatable %d after %s, want %d and %d", event, h.resource, c.Value(), a.Value(), h.timeout, h.devices, h.healthy)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func (h *dmHarness) allocatableDevices() []map[string]any {
	var ids []string
	for id := range h.manager.GetAllocatableDevices()[h.resource] {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	out := []map[string]any{}
	for _, id := range ids {
		d := h.manager.GetAllocatableDevices()[h.resource][id]
		out = append(out, devicesJSON([]*pluginapi.Device{d})[0])
	}
	return out
}

// admit allocates for one container of a new pod, as the kubelet's admission handler
// does, then asks for the run options (which issues PreStartContainer if required).
func (h *dmHarness) admit(request int) {
	pod := h.pod("pod-interop-1", request)
	h.pods = append(h.pods, pod)
	if err := h.manager.Allocate(pod, &pod.Spec.Containers[0]); err != nil {
		emit("allocate", map[string]any{"error": err.Error()})
		return
	}
	h.reportContainer("allocate", pod)
}

// pod is a pod with one container "c" that requests the harness's resource.
func (h *dmHarness) pod(uid string, request int) *v1.Pod {
	qty := resource.MustParse(fmt.Sprint(request))
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "interop", Namespace: "default", UID: types.UID(uid)},
		Spec: v1.PodSpec{Containers: []v1.Container{{
			Name: "c",
			Resources: v1.ResourceRequirements{
				Limits:   v1.ResourceList{v1.ResourceName(h.resource): qty},
				Requests: v1.ResourceList{v1.ResourceName(h.resource): qty},
			},
		}}},
	}
}

func (h *dmHarness) reportContainer(event string, pod *v1.Pod) {
	c := &pod.Spec.Containers[0]
	var ids []string
	for id := range h.manager.GetDevices(string(pod.UID), c.Name)[h.resource] {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	opts, err := h.manager.GetDeviceRunContainerOptions(context.Background(), pod, c)
	if err != nil {
		emit(event, map[string]any{"device_ids": ids, "error": err.Error()})
		return
	}
	emit(event, map[string]any{"device_ids": ids, "run_options": runOptionsJSON(opts)})
}

func runOptionsJSON(o *devicemanager.DeviceRunContainerOptions) map[string]any {
	envs, annotations := map[string]string{}, map[string]string{}
	for _, e := range o.Envs {
		envs[e.Name] = e.Value
	}
	for _, a := range o.Annotations {
		annotations[a.Name] = a.Value
	}
	mounts, devices, cdi := []map[string]any{}, []map[string]any{}, []string{}
	for _, m := range o.Mounts {
		mounts = append(mounts, map[string]any{"container_path": m.ContainerPath, "host_path": m.HostPath, "read_only": m.ReadOnly})
	}
	for _, d := range o.Devices {
		devices = append(devices, map[string]any{"container_path": d.PathInContainer, "host_path": d.PathOnHost, "permissions": d.Permissions})
	}
	for _, d := range o.CDIDevices {
		cdi = append(cdi, d.Name)
	}
	return map[string]any{"envs": envs, "annotations": annotations, "mounts": mounts, "devices": devices, "cdi_devices": cdi}
}
