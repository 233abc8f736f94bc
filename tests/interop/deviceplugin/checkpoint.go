package main

import (
	"bufio"
	"os"

	"k8s.io/apimachinery/pkg/util/dump"
	"k8s.io/kubernetes/pkg/kubelet/cm/devicemanager/checkpoint"
)

// runCheckpoint reads one kubelet_internal_checkpoint blob per stdin line and, for each,
// reports what the kubelet's own checkpoint code makes of it: the verification error
// (empty when the checksum matches), the spew dump it hashes, and the file it would write
// for the same data. The blob is decoded into the same pre-made empty slice and map as the
// device manager's getCheckpoint, so that missing and null fields hash as they do there.
func runCheckpoint(args []string) {
	scanner := bufio.NewScanner(os.Stdin)
	scanner.Buffer(make([]byte, 1<<20), 1<<26)
	for scanner.Scan() {
		cp := checkpoint.New(make([]checkpoint.PodDevicesEntry, 0), make(map[string][]string)).(*checkpoint.Data)
		if err := cp.UnmarshalCheckpoint(scanner.Bytes()); err != nil {
			emit("checkpoint", map[string]any{"error": err.Error()})
			continue
		}
		verify := ""
		if err := cp.VerifyChecksum(); err != nil {
			verify = err.Error()
		}
		hashed := dump.ForHash(cp.Data)
		blob, err := cp.MarshalCheckpoint()
		if err != nil {
			fail("marshal checkpoint: %v", err)
		}
		emit("checkpoint", map[string]any{"verify_error": verify, "dump": hashed, "checksum": uint64(cp.Checksum), "file": string(blob)})
	}
	if err := scanner.Err(); err != nil {
		fail("read stdin: %v", err)
	}
}
