// SPDX-License-Identifier: Apache-2.0

package shim

// Stage 1, PID 1 of the sandbox, is C code that runs before the Go
// runtime (shim/cstage/stage1.c and mount.c). What is left here is stage
// 0's half of the per-user budgets.

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// budgetShares is how many sandboxes one service user's per-user kernel
// budget is divided among: gloved runs at most 32 sessions at once
// (supervisor/service/daemon's MaxSessions), and one share is left for gloved.
const budgetShares = 33

// userBudgets are the per-user counts of /proc/sys/user: each is counted
// per uid in every user namespace from the creator's up to the initial
// one, so everything a sandbox makes is charged to the service user on
// the host as well. Those a kernel does not have are skipped.
var userBudgets = []string{
	"max_user_namespaces", "max_mnt_namespaces", "max_pid_namespaces",
	"max_net_namespaces", "max_ipc_namespaces", "max_uts_namespaces",
	"max_cgroup_namespaces", "max_time_namespaces",
	"max_inotify_instances", "max_inotify_watches",
	"max_fanotify_groups", "max_fanotify_marks",
}

// readBudgetShares is stage 0's half of stage 1's share_budgets
// (shim/cstage/stage1.c), which writes them into user namespace 1 and
// says why: the share of each of the service user's per-user budgets,
// read in stage 0's own user namespace (the host's, or the one gloved
// runs in), since stage 1 would read its new namespace's own, still
// unlimited, values.
func readBudgetShares() (map[string]int, error) {
	shares := map[string]int{}
	for _, name := range userBudgets {
		path := "/proc/sys/user/" + name
		data, err := os.ReadFile(path)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("per-user budget: %w", err)
		}
		host, err := strconv.Atoi(strings.TrimSpace(string(data)))
		if err != nil || host < 0 {
			return nil, fmt.Errorf("per-user budget: %s: %q is not a count", path, data)
		}
		shares[name] = max(host/budgetShares, 1)
	}
	if len(shares) == 0 {
		return nil, errors.New("per-user budget: /proc/sys/user lists none of the counts")
	}
	return shares, nil
}
