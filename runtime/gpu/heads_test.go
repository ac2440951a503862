package gpu

import (
	"strings"
	"testing"

	"github.com/attngen/attngen/runtime/mask"
)

func TestCheckHeadParams(t *testing.T) {
	ps := []mask.HeadParam{{Name: "window", Min: 1, Max: 8192}, {Name: "sinks", Min: 0, Max: 64}}
	if err := CheckHeadParams(ps, 2, []int32{1, 0, 8192, 64}); err != nil {
		t.Errorf("values at the ends of the ranges: %v", err)
	}
	if err := CheckHeadParams(nil, 3, nil); err != nil {
		t.Errorf("no parameters, no values: %v", err)
	}
	for _, c := range []struct {
		ps   []mask.HeadParam
		vals []int32
		want string
	}{
		{ps, []int32{1, 0, 5}, "3 head parameter values, want 4"},
		{ps, nil, "0 head parameter values, want 4"},
		{ps, []int32{1, 0, 0, 3}, "window = 0 at query head 1"},
		{ps, []int32{1, -1, 8, 3}, "sinks = -1 at query head 0"},
		{ps, []int32{8193, 0, 8, 3}, "out of its range [1, 8192]"},
		{nil, []int32{1, 2}, "2 head parameter values, want 0"},
	} {
		if err := CheckHeadParams(c.ps, 2, c.vals); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: err = %v, want it to mention %q", c.vals, err, c.want)
		}
	}
	k := Kernel{Params: [][3]string{{"q", "u64", ""}, {HeadParamsParam, "u64", ""}}}
	if !k.TakesHeadParams() || (Kernel{Params: k.Params[:1]}).TakesHeadParams() {
		t.Error("TakesHeadParams")
	}
}
