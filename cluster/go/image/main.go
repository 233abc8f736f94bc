// Command envsleep is the only program in the cluster's container image: it serves as the pod
// sandbox ("pause") and as the test container. It prints its environment, one variable a line, so
// a test can read what a device plugin granted from the container log, then sleeps until it is
// told to stop (as PID 1 of a container it must handle SIGTERM itself or it would never stop).
package main

import (
	"fmt"
	"os"
	"os/signal"
	"sort"
	"syscall"
)

func main() {
	env := os.Environ()
	sort.Strings(env)
	for _, kv := range env {
		fmt.Println(kv)
	}
	if len(os.Args) > 1 && os.Args[1] == "--exit" {
		return
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	<-stop
}
