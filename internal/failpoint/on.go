//go:build failpoints

package failpoint

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// Enabled reports whether this build kills itself at failpoints.
const Enabled = true

var (
	target, nth = parse(os.Getenv("TEND_FAILPOINT"))
	mu          sync.Mutex
	hits        = map[string]int{}
)

func parse(v string) (string, int) {
	name, n, ok := strings.Cut(v, "#")
	if !ok {
		return name, 1
	}
	i, err := strconv.Atoi(n)
	if err != nil || i < 1 {
		return name, 1
	}
	return name, i
}

// Hit kills the process if this is the step $TEND_FAILPOINT names.
func Hit(name string) {
	if target == "" || name != target {
		return
	}
	mu.Lock()
	hits[name]++
	n := hits[name]
	mu.Unlock()
	if n == nth {
		fmt.Fprintf(os.Stderr, "failpoint %s#%d: killed\n", name, n)
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {} // the signal takes the process
	}
}
