// Command envsleep is the only program in the cluster's container image: it serves as the pod
// sandbox ("pause") and as the test container. It prints its environment, one variable a line, so
// a test can read what a device plugin granted from the container log, then sleeps until it is
// told to stop (as PID 1 of a container it must handle SIGTERM itself or it would never stop).
//
// Its last line is always end (below): the container runtime copies the output to the pod's log
// line by line as the program writes it, so a log read while the program still prints holds only
// the first lines (HOME=/ and nothing after). Readers wait for this line before they look
// (kubedevice.testing.scenarios.container_output).
//
// Arguments: --exit stops after printing; --write PATH... also prints the process's ids and, for
// each PATH, its owner and mode as the container sees them and whether it opens for writing
// (the image has no shell, so this is how a test asks whether a non-root container can use its
// device); --cat PATH... also prints each PATH's content, between a line "cat PATH:" and a line
// "end PATH" (a DRA driver's device metadata file, say), or the error reading it.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"sort"
	"syscall"
)

// end is the line printed after everything else (scenarios.py's OUTPUT_END).
const end = "--- envsleep: end of output ---"

func main() {
	env := os.Environ()
	sort.Strings(env)
	for _, kv := range env {
		fmt.Println(kv)
	}
	args := os.Args[1:]
	if len(args) > 0 && args[0] == "--write" {
		probe(args[1:])
	}
	if len(args) > 0 && args[0] == "--cat" {
		show(args[1:])
	}
	fmt.Println(end)
	if len(args) > 0 && args[0] == "--exit" {
		return
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	<-stop
}

func probe(paths []string) {
	fmt.Printf("id uid=%d gid=%d groups=%v\n", os.Getuid(), os.Getgid(), groups())
	for _, path := range paths {
		var st syscall.Stat_t
		if err := syscall.Stat(path, &st); err != nil {
			fmt.Printf("stat %s: %v\n", path, err)
		} else {
			fmt.Printf("stat %s: uid=%d gid=%d mode=%o\n", path, st.Uid, st.Gid, st.Mode&0o7777)
		}
		file, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			fmt.Printf("write %s: %v\n", path, err)
			continue
		}
		_, err = file.Write([]byte("kubedevice\n"))
		file.Close()
		if err != nil {
			fmt.Printf("write %s: %v\n", path, err)
		} else {
			fmt.Printf("write %s: ok\n", path)
		}
	}
}

func show(paths []string) {
	for _, path := range paths {
		data, err := os.ReadFile(path)
		if err != nil {
			fmt.Printf("cat %s: %v\n", path, err)
			continue
		}
		if len(data) > 0 && data[len(data)-1] != '\n' {
			data = append(data, '\n')
		}
		fmt.Printf("cat %s:\n%send %s\n", path, data, path)
	}
}

func groups() []int {
	ids, err := os.Getgroups()
	if err != nil {
		return nil
	}
	return ids
}
