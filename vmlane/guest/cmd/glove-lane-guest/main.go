// SPDX-License-Identifier: Apache-2.0

// Command glove-lane-guest is the in-guest agent of Glove's VM lane
// (package vmlane/guest): `glove-lane-guest run --lane /lane`, as root, on
// every boot of a lane guest. The other subcommands are its own helpers,
// run as the glove user: dial (connect to gloved's socket and pass the
// connection back), upstream (the inherited-stream echo service) and
// probe-userns.
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/glove-sandbox/glove/vmlane/guest"
)

const usage = `usage:
  glove-lane-guest run [--lane /lane] [--no-systemd] [--deadline 25m] [--session-timeout 120s]
                       [--check-timeout 10m] [--reboot hard|clean] [--only CHECK,...]
  (internal) glove-lane-guest dial --socket PATH        (descriptor 3: where to send the connection)
  (internal) glove-lane-guest upstream --socket PATH [--reply-prefix P]
  (internal) glove-lane-guest probe-userns`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, usage)
		os.Exit(2)
	}
	fs := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	switch os.Args[1] {
	case "run":
		lane := fs.String("lane", "/lane", "the lane disk")
		noSystemd := fs.Bool("no-systemd", false, "development: run gloved as a child instead of the unit; no reboot, no power-off")
		deadline := fs.Duration("deadline", 25*time.Minute, "global deadline from the first boot")
		sessionTimeout := fs.Duration("session-timeout", 120*time.Second, "one session, start to end")
		checkTimeout := fs.Duration("check-timeout", 10*time.Minute, "one check")
		only := fs.String("only", "", "development: a comma-separated list of the checks to run")
		reboot := fs.String("reboot", "hard", "hard (reboot --force --force: a crash, gloved cannot end its session) or clean (systemctl reboot)")
		_ = fs.Parse(os.Args[2:])
		if *reboot != "hard" && *reboot != "clean" {
			fmt.Fprintln(os.Stderr, usage)
			os.Exit(2)
		}
		if os.Geteuid() != 0 {
			fmt.Fprintln(os.Stderr, "glove-lane-guest run: must run as root")
			os.Exit(2)
		}
		os.Exit(guest.Main(guest.Config{Lane: *lane, NoSystemd: *noSystemd, Deadline: *deadline,
			SessionTimeout: *sessionTimeout, CheckTimeout: *checkTimeout, RebootMode: *reboot, Out: os.Stdout, Only: split(*only)}))
	case "dial":
		sock := fs.String("socket", "", "")
		_ = fs.Parse(os.Args[2:])
		if err := guest.DialChild(*sock); err != nil {
			fmt.Fprintln(os.Stderr, "dial:", err)
			os.Exit(1)
		}
	case "upstream":
		sock := fs.String("socket", "", "")
		prefix := fs.String("reply-prefix", "echo ", "")
		_ = fs.Parse(os.Args[2:])
		err := guest.Upstream(*sock, *prefix, os.Stdout)
		fmt.Fprintln(os.Stderr, "upstream:", err)
		os.Exit(1)
	case "probe-userns":
		if err := guest.ProbeUserns(); err != nil {
			fmt.Fprintln(os.Stderr, "probe-userns:", err)
			os.Exit(1)
		}
	default:
		fmt.Fprintln(os.Stderr, usage)
		os.Exit(2)
	}
}

func split(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}
