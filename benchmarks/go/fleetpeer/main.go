// fleetpeer: benchmarks/fleet.py's Go peer. N simulated nodes, each publishing its pool with
// Kubernetes' own resourceslice.Controller (k8s.io/dynamic-resource-allocation/resourceslice),
// one client per node at client-go's defaults for a kubelet plugin (QPS 5, burst 10), the Node
// read once for the owner UID as kubeletplugin does. Driven by lines on stdin:
//
//	start                     start every node's controller; prints "started <s>" once every
//	                          controller's informer has synced and "published <s>" once every
//	                          pool's slices have been created (from the controllers' own stats),
//	                          before it, at the first start, "latencies <s,s,...>": each node's
//	                          time from its start (client, Node GET) to its slices created
//	flip <nodes> <hz> <secs>  the first <nodes> nodes flip one device's taint <hz> times a second
//	                          for <secs> seconds, ending tainted; prints "flipped <n>"
//	stats                     prints "stats <creates> <updates> <deletes>" summed over the nodes
//	stop                      stops every controller; prints "stopped"
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/dynamic-resource-allocation/resourceslice"
)

// slices: a node's pool in each device state, as benchmarks/fleet.py's slice_specs writes it
// (the same content kubedevice publishes: one slice of devices and, for the partitionable
// variant, one of shared counter sets).
type slices struct {
	Healthy   []resourceslice.Slice `json:"healthy"`
	Unhealthy []resourceslice.Slice `json:"unhealthy"`
}

type fleet struct {
	kubeconfig, prefix, driver string
	nodes, wave                int
	qps                        float32
	burst                      int
	slices                     slices
	controllers                []*resourceslice.Controller
	tainted                    []bool // each node's device state, kept over a restart as the hardware is
	restarted                  bool
	latencies                  []float64 // each node's seconds from its start to its slices created (first start)
	cancel                     context.CancelFunc
	mu                         sync.Mutex
}

func (f *fleet) resources(node string, tainted bool) *resourceslice.DriverResources {
	list := f.slices.Healthy
	if tainted {
		list = f.slices.Unhealthy
	}
	return &resourceslice.DriverResources{Pools: map[string]resourceslice.Pool{node: {Slices: list}}}
}

func (f *fleet) start() {
	begin := time.Now()
	ctx, cancel := context.WithCancel(context.Background())
	f.cancel = cancel
	f.controllers = make([]*resourceslice.Controller, f.nodes)
	// wave nodes at a time, as benchmarks/fleet.py's WAVE: each wave synced before the next
	for first := 0; first < f.nodes; first += f.wave {
		var wg sync.WaitGroup
		for i := first; i < min(first+f.wave, f.nodes); i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				f.controllers[i] = f.startOne(ctx, i)
			}()
		}
		wg.Wait()
	}
	fmt.Printf("started %.3f\n", time.Since(begin).Seconds())
	// A restart with unchanged devices writes nothing, so the controllers' stats cannot tell
	// when it is done: its informers have synced, the sync that follows compares only.
	for !f.restarted {
		creates, updates, _ := f.stats()
		if creates+updates >= int64(f.nodes*len(f.slices.Healthy)) || time.Since(begin) > 10*time.Minute {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !f.restarted {
		f.waitLatencies(begin)
	}
	fmt.Printf("published %.3f\n", time.Since(begin).Seconds())
}

// waitLatencies prints every node's latency once each is known (its watcher goroutine stores it).
func (f *fleet) waitLatencies(begin time.Time) {
	texts := make([]string, f.nodes)
	for i := range f.nodes {
		for f.latency(i) == 0 && time.Since(begin) < 10*time.Minute {
			time.Sleep(10 * time.Millisecond)
		}
		texts[i] = strconv.FormatFloat(f.latency(i), 'f', 4, 64)
	}
	fmt.Printf("latencies %s\n", strings.Join(texts, ","))
}

func (f *fleet) latency(i int) float64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.latencies[i]
}

// watchCreated records when node i's controller has created all its slices, polled every 10 ms.
func (f *fleet) watchCreated(i int, began time.Time, controller *resourceslice.Controller) {
	for controller.GetStats().NumCreates < int64(len(f.slices.Healthy)) && time.Since(began) < 10*time.Minute {
		time.Sleep(10 * time.Millisecond)
	}
	f.mu.Lock()
	f.latencies[i] = time.Since(began).Seconds()
	f.mu.Unlock()
}

func (f *fleet) startOne(ctx context.Context, i int) *resourceslice.Controller {
	began := time.Now()
	config, err := clientcmd.BuildConfigFromFlags("", f.kubeconfig)
	must(err)
	config.QPS, config.Burst = f.qps, f.burst
	client, err := kubernetes.NewForConfig(config)
	must(err)
	name := fmt.Sprintf("%s%d", f.prefix, i)
	node, err := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	must(err)
	controller, err := resourceslice.StartController(ctx, resourceslice.Options{
		DriverName: f.driver,
		KubeClient: client,
		Owner:      &resourceslice.Owner{APIVersion: "v1", Kind: "Node", Name: name, UID: node.UID},
		Resources:  f.resources(name, f.tainted[i]),
	})
	must(err)
	if !f.restarted {
		go f.watchCreated(i, began, controller)
	}
	return controller
}

func (f *fleet) flip(count int, hz float64, secs float64) {
	flips := int(hz*secs) | 1 // odd: every flipping node ends tainted
	tick := time.NewTicker(time.Duration(float64(time.Second) / hz))
	defer tick.Stop()
	for n := range flips {
		<-tick.C
		for i := range count {
			f.tainted[i] = n%2 == 0
			f.controllers[i].Update(f.resources(fmt.Sprintf("%s%d", f.prefix, i), f.tainted[i]))
		}
	}
	fmt.Printf("flipped %d\n", flips)
}

func (f *fleet) stats() (creates, updates, deletes int64) {
	for _, c := range f.controllers {
		if c == nil {
			continue
		}
		s := c.GetStats()
		creates, updates, deletes = creates+s.NumCreates, updates+s.NumUpdates, deletes+s.NumDeletes
	}
	return
}

func (f *fleet) stop() {
	f.cancel()
	for _, c := range f.controllers {
		c.Stop()
	}
	f.controllers = nil
	f.restarted = true
	fmt.Println("stopped")
}

func must(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "fleetpeer:", err)
		os.Exit(1)
	}
}

func main() {
	f := &fleet{}
	var slicesFile string
	var qps float64
	flag.StringVar(&f.kubeconfig, "kubeconfig", "", "kubeconfig")
	flag.StringVar(&f.prefix, "prefix", "kdgo-", "node name prefix")
	flag.StringVar(&f.driver, "driver", "", "DRA driver name")
	flag.IntVar(&f.nodes, "nodes", 1000, "simulated nodes")
	flag.IntVar(&f.wave, "wave", 100, "nodes started at once")
	flag.Float64Var(&qps, "qps", 5, "client QPS per node")
	flag.IntVar(&f.burst, "burst", 10, "client burst per node")
	flag.StringVar(&slicesFile, "slices", "", "JSON {healthy: [slices], unhealthy: [slices]}, each {devices, sharedCounters}")
	flag.Parse()
	f.qps = float32(qps)
	f.tainted = make([]bool, f.nodes)
	f.latencies = make([]float64, f.nodes)
	data, err := os.ReadFile(slicesFile)
	must(err)
	must(json.Unmarshal(data, &f.slices))
	lines := bufio.NewScanner(os.Stdin)
	for lines.Scan() {
		words := strings.Fields(lines.Text())
		switch {
		case len(words) == 0:
		case words[0] == "start":
			f.start()
		case words[0] == "flip" && len(words) == 4:
			count, _ := strconv.Atoi(words[1])
			hz, _ := strconv.ParseFloat(words[2], 64)
			secs, _ := strconv.ParseFloat(words[3], 64)
			f.flip(count, hz, secs)
		case words[0] == "stats":
			creates, updates, deletes := f.stats()
			fmt.Printf("stats %d %d %d\n", creates, updates, deletes)
		case words[0] == "stop":
			f.stop()
		default:
			fmt.Fprintln(os.Stderr, "fleetpeer: unknown command:", lines.Text())
		}
	}
}
