// SPDX-License-Identifier: Apache-2.0

package cli

import (
	"bytes"
	"strings"
	"testing"

	"github.com/glove-sandbox/glove/supervisor/engine/materialize"
)

// TestProgressBar: the bar is drawn once a percent, erased when the copy
// is complete (so the program's output starts on a clean line, not after
// "100% 4.0 MiB / 4.0 MiB"), erased again at the end only if still drawn
// (else a program's last line without a newline would be erased), and a
// done past total (a file grown since the scan) neither panics nor draws
// over 100%. Nothing it writes holds a NUL.
func TestProgressBar(t *testing.T) {
	var w bytes.Buffer
	b := &progressBar{w: &w, last: -1}
	tot := materialize.Totals{Bytes: 1000}
	for _, d := range []int64{0, 5, 500, 500, 999} {
		b.draw("/workspace", materialize.Totals{Bytes: d}, tot)
	}
	if got := strings.Count(w.String(), "copying to /workspace ["); got != 3 {
		t.Errorf("%d bars drawn for 0%%, 0%%, 50%%, 50%%, 99%%; want 3: %q", got, w.String())
	}
	b.draw("/workspace", tot, tot)
	if !strings.HasSuffix(w.String(), "\r\033[K") || b.shown {
		t.Errorf("complete copy: output ends %q, shown %v; want the line erased", w.String()[max(0, w.Len()-20):], b.shown)
	}
	n := w.Len()
	b.clear()
	if w.Len() != n {
		t.Errorf("clear after the line was erased wrote %q", w.String()[n:])
	}
	b.draw("/big", materialize.Totals{Bytes: 10}, tot)
	b.draw("/big", materialize.Totals{Bytes: 5000}, tot) // grown: clamped, complete
	if b.shown || strings.Contains(w.String(), "500%") {
		t.Errorf("done past total: shown %v, output %q", b.shown, w.String())
	}
	b.draw("/half", materialize.Totals{Bytes: 10}, tot)
	b.clear()
	if !strings.HasSuffix(w.String(), "\r\033[K") || b.shown {
		t.Errorf("a bar left by a failed copy is not erased: %q", w.String())
	}
	if strings.ContainsRune(w.String(), 0) {
		t.Errorf("the progress output holds a NUL: %q", w.String())
	}
}
