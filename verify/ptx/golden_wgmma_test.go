package ptx_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/attngen/attngen/verify/ptx/wgmmarec"
)

// The wgmma and tensor-copy goldens come from wgmmarec's recorder (see
// testdata/README.md); until a GPU session records them these tests skip.
// ATTNGEN_WGMMA_GOLDENS names another directory to replay (a fresh
// recording, before it is committed).

func goldenPath(t *testing.T, name string) string {
	t.Helper()
	dir := os.Getenv("ATTNGEN_WGMMA_GOLDENS")
	if dir == "" {
		dir = filepath.Join("testdata", "h200")
	}
	p := filepath.Join(dir, name)
	if _, err := os.Stat(p); errors.Is(err, fs.ErrNotExist) {
		t.Skipf("%s not recorded yet (testdata/README.md: wgmma)", p)
	}
	return p
}

// TestGoldenWgmma replays every recorded wgmma.mma_async case through the
// interpreter: the same kernel, the same image, descriptors, registers and
// scale flags; every output register must match bit for bit.
func TestGoldenWgmma(t *testing.T) {
	var f wgmmarec.WgmmaFile
	if err := wgmmarec.ReadFile(goldenPath(t, wgmmarec.WgmmaFileName), &f); err != nil {
		t.Fatal(err)
	}
	if len(f.Cases) == 0 {
		t.Fatal("no cases")
	}
	r, err := wgmmarec.ReplayWgmma(&f)
	if err != nil {
		t.Fatal(err)
	}
	if !r.OK() {
		t.Fatalf("%s vs %s:\n%s", f.Instruction, f.Device, r)
	}
	t.Logf("%s, recorded on %s: %s", f.Instruction, f.Device, r)
}

// TestGoldenTensorCopy replays every recorded cp.async.bulk.tensor.2d box:
// the shared bytes must match the recorded ones word for word.
func TestGoldenTensorCopy(t *testing.T) {
	var f wgmmarec.CopyFile
	if err := wgmmarec.ReadFile(goldenPath(t, wgmmarec.CopyFileName), &f); err != nil {
		t.Fatal(err)
	}
	if len(f.Cases) == 0 {
		t.Fatal("no cases")
	}
	r, err := wgmmarec.ReplayCopy(&f)
	if err != nil {
		t.Fatal(err)
	}
	if !r.OK() {
		t.Fatalf("%s vs %s:\n%s", f.Instruction, f.Device, r)
	}
	t.Logf("%s, recorded on %s: %s", f.Instruction, f.Device, r)
}
