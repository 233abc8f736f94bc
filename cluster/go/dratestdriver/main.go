// Command dra-test-driver is Kubernetes' own DRA test driver (k8s.io/kubernetes/test/e2e/dra/test-driver),
// pinned by this module's go.mod, built so that tests and benchmarks can run the Go reference
// kubelet plugin (k8s.io/dynamic-resource-allocation/kubeletplugin) beside kubedevice's.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/test/e2e/dra/test-driver/app"
)

func main() {
	os.Exit(cli.Run(app.NewCommand()))
}
