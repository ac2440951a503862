package wgmmarec

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/attngen/attngen/cuda"
	"github.com/attngen/attngen/cuda/cudamock"
	"github.com/ebitengine/purego"
)

// mockLaunch is the mock driver's launch record (cudamock.Launch).
type mockLaunch = cudamock.Launch

// TestGPUBackendOnMock runs the GPU backend's plumbing against the CUDA
// binding's mock driver (cuda/testdata/mock_cuda.c, a "Mock NVIDIA H200"
// that loads modules, checks and records launches, but runs no kernel):
// every recording kernel loads, every launch passes the parameters its
// .entry declares with the dynamic shared memory the case needs, and the
// tensor maps encode. Since nothing runs, the outputs stay as the recorder
// initialized them and the copies never see their mbarrier complete.
func TestGPUBackendOnMock(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the mock driver is built for linux only")
	}
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skip("no gcc to build the mock driver")
	}
	lib := filepath.Join(t.TempDir(), "libcuda.so.1")
	if out, err := exec.Command(gcc, "-shared", "-fPIC", "-O1", "-o", lib, filepath.Join("..", "..", "..", "cuda", "testdata", "mock_cuda.c")).CombinedOutput(); err != nil {
		t.Fatalf("building the mock: %v\n%s", err, out)
	}
	t.Setenv(cuda.LibraryEnv, lib)
	g, err := OpenGPU()
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if g.Arch() != "sm_90" || !strings.Contains(g.Name(), "Mock") {
		t.Fatalf("opened %s (%s), want the mock H200", g.Name(), g.Arch())
	}
	h, err := purego.Dlopen(lib, purego.RTLD_NOW|purego.RTLD_GLOBAL)
	if err != nil {
		t.Fatal(err)
	}
	var lastLaunch func(*mockLaunch) int32
	purego.RegisterLibFunc(&lastLaunch, h, "mock_last_launch")

	f, err := RecordWgmma(g)
	if err != nil {
		t.Fatalf("RecordWgmma on the mock: %v", err)
	}
	if len(f.Cases) != len(specs()) {
		t.Fatalf("%d cases recorded, want %d", len(f.Cases), len(specs()))
	}
	var l mockLaunch
	lastLaunch(&l)
	c := f.Cases[len(f.Cases)-1]
	db, _ := parseHex(c.DescB)
	switch {
	case l.Block != [3]uint32{128, 1, 1} || l.Grid != [3]uint32{1, 1, 1}:
		t.Errorf("last launch: grid %v block %v", l.Grid, l.Block)
	case l.Shared != uint32(c.Fill+1024):
		t.Errorf("last launch: %d bytes of shared memory, want %d", l.Shared, c.Fill+1024)
	case l.NParams != 10 || l.Sizes[1] != 4 || l.Sizes[7] != 8 || l.Sizes[9] != 4:
		t.Errorf("last launch: %d parameters of sizes %v", l.NParams, l.Sizes[:l.NParams])
	case l.Values[1] != uint64(4*len(c.Image)) || l.Values[7] != db || l.Values[8] != uint64(c.ScaleD) || l.Values[9] != uint64(c.Fill):
		t.Errorf("last launch: parameter values %#x", l.Values[:l.NParams])
	}
	for _, d := range c.D {
		if d != 0xffffffff {
			t.Fatalf("the mock ran no kernel, yet output %#x came back", d)
		}
	}

	cf, err := RecordCopy(g)
	if err == nil || !strings.Contains(err.Error(), "did not complete") || len(cf.Cases) != 0 {
		t.Errorf("RecordCopy on the mock: %v (%d cases), want the first case's wait to report no completion", err, len(cf.Cases))
	}
	lastLaunch(&l)
	if l.NParams != 6 || l.Shared != 4096+1024 || l.Values[5] != 4096 {
		t.Errorf("tensor copy launch: %d parameters %#x, shared %d", l.NParams, l.Values[:l.NParams], l.Shared)
	}
}
