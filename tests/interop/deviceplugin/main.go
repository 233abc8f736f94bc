// Command dpharness plays the kubelet against a device plugin, using only official
// Kubernetes Go code: the generated v1beta1 stubs with grpc-go (client, bench) or the
// kubelet's own device manager (devicemanager) and checkpoint code (checkpoint). It prints JSON lines so that the Python
// tests can compare what Go decoded with what the plugin meant to send.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"sync"
)

var stdoutMu sync.Mutex

// emit writes one JSON event line; the Python side reads them as they come.
func emit(event string, fields map[string]any) {
	fields["event"] = event
	line, err := json.Marshal(fields)
	if err != nil {
		panic(err)
	}
	stdoutMu.Lock()
	defer stdoutMu.Unlock()
	os.Stdout.Write(append(line, '\n'))
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "dpharness: "+format+"\n", args...)
	os.Exit(1)
}

func main() {
	if len(os.Args) < 2 {
		fail("usage: dpharness client|bench-allocate|devicemanager|checkpoint [flags]")
	}
	commands := map[string]func([]string){
		"client":         runClient,
		"bench-allocate": runBenchAllocate,
		"devicemanager":  runDeviceManager,
		"checkpoint":     runCheckpoint,
	}
	run, ok := commands[os.Args[1]]
	if !ok {
		fail("unknown command %q", os.Args[1])
	}
	run(os.Args[2:])
}
