// go_profiles.go: profiles written by Go's own runtime/pprof, for
// tests/go_profiles.sh: labelprof must read them as go tool pprof does.
// The runtime writes the Profile message's fields in its own order (a CPU
// profile starts with time_nanos, field 9; heap and goroutine profiles with
// period_type, field 11), unlike go tool pprof -proto and labelprof.
//
//	go run go_profiles.go CPU.pb.gz HEAP.pb.gz GOROUTINE.pb.gz
//
// Standard library only: it builds with no module and no network.
package main

import (
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"strings"
	"time"
)

var sink []byte

//go:noinline
func burn(d time.Duration) int {
	n := 0
	for start := time.Now(); time.Since(start) < d; {
		for i := 0; i < 100000; i++ {
			n += i * i
		}
	}
	return n
}

//go:noinline
func allocate() {
	for i := 0; i < 1000; i++ {
		sink = make([]byte, 64<<10)
	}
}

//go:noinline
func parked(c chan int) { <-c }

// parkedNow reports whether a goroutine is blocked receiving in parked, as
// the runtime prints every goroutine's stack. (The goroutine count is no
// sign: the CPU profile's writer goroutine may still be winding down.)
func parkedNow() bool {
	buf := make([]byte, 1<<20)
	n := runtime.Stack(buf, true)
	for _, g := range strings.Split(string(buf[:n]), "\n\n") {
		if strings.Contains(g, "[chan receive") && strings.Contains(g, "main.parked(") {
			return true
		}
	}
	return false
}

func write(path string, f func(*os.File) error) {
	out, err := os.Create(path)
	if err == nil {
		err = f(out)
		if cerr := out.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "go_profiles:", err)
		os.Exit(1)
	}
}

func main() {
	if len(os.Args) != 4 {
		fmt.Fprintln(os.Stderr, "usage: go run go_profiles.go CPU HEAP GOROUTINE")
		os.Exit(2)
	}
	runtime.MemProfileRate = 1 // every allocation sampled: allocate is in the heap profile whatever the machine
	write(os.Args[1], func(f *os.File) error {
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		burn(300 * time.Millisecond)
		pprof.StopCPUProfile()
		return nil
	})
	allocate()
	runtime.GC()
	write(os.Args[2], func(f *os.File) error { return pprof.Lookup("heap").WriteTo(f, 0) })
	c := make(chan int)
	go parked(c)
	for !parkedNow() {
		runtime.Gosched()
	}
	write(os.Args[3], func(f *os.File) error { return pprof.Lookup("goroutine").WriteTo(f, 0) })
	close(c)
}
