package main

import (
	"google.golang.org/grpc/status"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// The JSON shapes below are what Go decoded, spelled with the proto field names so
// that a Python test compares them with its plain data without any protobuf code.

func optionsJSON(o *pluginapi.DevicePluginOptions) map[string]any {
	if o == nil {
		return nil
	}
	return map[string]any{
		"pre_start_required":                 o.PreStartRequired,
		"get_preferred_allocation_available": o.GetPreferredAllocationAvailable,
	}
}

func devicesJSON(devs []*pluginapi.Device) []map[string]any {
	out := []map[string]any{}
	for _, d := range devs {
		var nodes []int64
		if d.Topology != nil {
			nodes = []int64{}
			for _, n := range d.Topology.Nodes {
				nodes = append(nodes, n.ID)
			}
		}
		out = append(out, map[string]any{"id": d.ID, "health": d.Health, "numa_nodes": nodes})
	}
	return out
}

func containerJSON(c *pluginapi.ContainerAllocateResponse) map[string]any {
	mounts := []map[string]any{}
	for _, m := range c.Mounts {
		mounts = append(mounts, map[string]any{
			"container_path": m.ContainerPath, "host_path": m.HostPath, "read_only": m.ReadOnly,
		})
	}
	devices := []map[string]any{}
	for _, d := range c.Devices {
		devices = append(devices, map[string]any{
			"container_path": d.ContainerPath, "host_path": d.HostPath, "permissions": d.Permissions,
		})
	}
	cdi := []string{}
	for _, d := range c.CdiDevices {
		cdi = append(cdi, d.Name)
	}
	return map[string]any{
		"envs": orEmpty(c.Envs), "annotations": orEmpty(c.Annotations),
		"mounts": mounts, "devices": devices, "cdi_devices": cdi,
	}
}

func orEmpty(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

// errorJSON keeps the gRPC status code name, which the Python side checks.
func errorJSON(err error) map[string]any {
	s := status.Convert(err)
	return map[string]any{"code": s.Code().String(), "message": s.Message()}
}
