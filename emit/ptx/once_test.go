package ptx

import (
	"crypto/sha256"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"weak"

	"github.com/attngen/attngen/gen"
	ptxi "github.com/attngen/attngen/verify/ptx"
)

// Work the tests of this package share within one test binary, so that no
// test repeats what another (or an earlier subtest) already did:
//
//   - generated: the forward and backward kernels of a plan and config,
//     each generated and parsed by the interpreter once per plan (keyed by
//     the plan's address, dropped when the plan is collected);
//   - assembleAll: ptxas runs, keyed by (ptxas, arch, module text), run
//     concurrently on the CPUs and kept, with their cubins, for the
//     binary's life; disassembleAll likewise for nvdisasm.
//
// The results are the same values a test computed itself before; every
// check still runs on them. Memoized values are shared, so tests must not
// modify them.

// memo runs a function once per key; concurrent callers of one key wait
// for the first.
type memo[K comparable, V any] struct {
	mu sync.Mutex
	m  map[K]*memoEntry[V]
}

type memoEntry[V any] struct {
	once sync.Once
	v    V
}

func (c *memo[K, V]) get(k K, f func() V) V {
	c.mu.Lock()
	if c.m == nil {
		c.m = map[K]*memoEntry[V]{}
	}
	e, ok := c.m[k]
	if !ok {
		e = &memoEntry[V]{}
		c.m[k] = e
	}
	c.mu.Unlock()
	e.once.Do(func() { e.v = f() })
	return e.v
}

func (c *memo[K, V]) drop(k K) {
	c.mu.Lock()
	delete(c.m, k)
	c.mu.Unlock()
}

// planKey is a plan (weakly: the memo does not keep it alive) and the
// config its kernels are generated with.
type planKey struct {
	p   weak.Pointer[gen.Plan]
	cfg Config
}

// kernels is what generated memoizes per plan and config: the forward
// kernel and its parsed module, and the backward module and its parse,
// each made on first use (with the error it gave, if any).
type kernels struct {
	fwdOnce, fmodOnce, bwdOnce, bmodOnce sync.Once
	fwd                                  *Forward
	fmod                                 *ptxi.Module
	bwd                                  *Backward
	bmod                                 *ptxi.Module
	fwdErr, fmodErr, bwdErr, bmodErr     error
}

var planKernels memo[planKey, *kernels]

func kernelsOf(p *gen.Plan, cfg Config) *kernels {
	k := planKey{weak.Make(p), cfg}
	return planKernels.get(k, func() *kernels {
		runtime.AddCleanup(p, func(k planKey) { planKernels.drop(k) }, k)
		return &kernels{}
	})
}

// forwardOf returns GenerateForward(p, cfg), failing t on an error.
func forwardOf(t *testing.T, p *gen.Plan, cfg Config) *Forward {
	t.Helper()
	ks := kernelsOf(p, cfg)
	ks.fwdOnce.Do(func() { ks.fwd, ks.fwdErr = GenerateForward(p, cfg) })
	if ks.fwdErr != nil {
		t.Fatal(ks.fwdErr)
	}
	return ks.fwd
}

// generated returns forwardOf(t, p, cfg) and the interpreter's parse of
// its module (named after the kernel, .ptx), failing t on an error.
func generated(t *testing.T, p *gen.Plan, cfg Config) (*Forward, *ptxi.Module) {
	t.Helper()
	k := forwardOf(t, p, cfg)
	ks := kernelsOf(p, cfg)
	ks.fmodOnce.Do(func() { ks.fmod, ks.fmodErr = ptxi.Parse(k.Name+".ptx", k.PTX) })
	if ks.fmodErr != nil {
		t.Fatal(ks.fmodErr)
	}
	return k, ks.fmod
}

// backwardOf returns GenerateBackward(p, cfg), failing t on an error.
func backwardOf(t *testing.T, p *gen.Plan, cfg Config) *Backward {
	t.Helper()
	ks := kernelsOf(p, cfg)
	ks.bwdOnce.Do(func() { ks.bwd, ks.bwdErr = GenerateBackward(p, cfg) })
	if ks.bwdErr != nil {
		t.Fatal(ks.bwdErr)
	}
	return ks.bwd
}

// generatedBackward is generated for the backward module (named after the
// dq kernel).
func generatedBackward(t *testing.T, p *gen.Plan, cfg Config) (*Backward, *ptxi.Module) {
	t.Helper()
	b := backwardOf(t, p, cfg)
	ks := kernelsOf(p, cfg)
	ks.bmodOnce.Do(func() { ks.bmod, ks.bmodErr = ptxi.Parse(b.DQ+".ptx", b.PTX) })
	if ks.bmodErr != nil {
		t.Fatal(ks.bmodErr)
	}
	return b, ks.bmod
}

// asmJob is one ptxas run: ptxas -v --gpu-name arch on the module text.
type asmJob struct {
	ptxas, arch, text string
}

// asmResult is what ptxas gave: its combined output (the -v report), the
// cubin's path (in cubinDir), and the error of a failed run.
type asmResult struct {
	log   string
	cubin string
	err   error
}

var (
	asmRuns memo[[sha256.Size]byte, asmResult]
	disRuns memo[string, asmResult] // by nvdisasm and cubin path; log is the listing

	cubinOnce sync.Once
	cubinDir  string // removed by TestMain
	cubinErr  error
)

func (j asmJob) key() [sha256.Size]byte {
	return sha256.Sum256([]byte(j.ptxas + "\x00" + j.arch + "\x00" + j.text))
}

// parallelDo runs f(0..n-1) on up to GOMAXPROCS goroutines.
func parallelDo(n int, f func(int)) {
	var wg sync.WaitGroup
	next := make(chan int)
	for range min(n, runtime.GOMAXPROCS(0)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				f(i)
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
}

// assembleAll runs ptxas on every job, at most once per distinct job in
// the test binary, up to GOMAXPROCS at a time, and returns the results in
// job order. A failed run is a result with err set (callers report it with
// their own names for the kernels).
func assembleAll(t *testing.T, jobs []asmJob) []asmResult {
	t.Helper()
	cubinOnce.Do(func() { cubinDir, cubinErr = os.MkdirTemp("", "attngen-ptxas-") })
	if cubinErr != nil {
		t.Fatal(cubinErr)
	}
	res := make([]asmResult, len(jobs))
	parallelDo(len(jobs), func(i int) {
		j := jobs[i]
		k := j.key()
		res[i] = asmRuns.get(k, func() asmResult {
			base := filepath.Join(cubinDir, fmt.Sprintf("%x", k[:12]))
			if err := os.WriteFile(base+".ptx", []byte(j.text), 0o644); err != nil {
				return asmResult{err: err}
			}
			out, err := exec.Command(j.ptxas, "-v", "--gpu-name", j.arch, base+".ptx", "-o", base+".cubin").CombinedOutput()
			return asmResult{log: string(out), cubin: base + ".cubin", err: err}
		})
	})
	return res
}

// disassembleAll runs nvdisasm dis on every cubin (once per cubin in the
// test binary, up to GOMAXPROCS at a time) and returns the listings'
// results in order: log is nvdisasm's combined output.
func disassembleAll(dis string, cubins []string) []asmResult {
	res := make([]asmResult, len(cubins))
	parallelDo(len(cubins), func(i int) {
		c := cubins[i]
		res[i] = disRuns.get(dis+"\x00"+c, func() asmResult {
			out, err := exec.Command(dis, c).CombinedOutput()
			return asmResult{log: string(out), cubin: c, err: err}
		})
	})
	return res
}
