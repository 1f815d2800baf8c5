// Command glove-loopext4 is the ext4 image helper; see package loopext4.
// Started as loopext4.FormatterName or loopext4.MkfsName it is the
// helper's formatter or its formatting child (see loopext4/format.go).
package main

import (
	"os"

	"github.com/glove-sandbox/glove/helpers/helperkit"
	"github.com/glove-sandbox/glove/helpers/loopext4"
)

func main() {
	switch os.Args[0] {
	case loopext4.FormatterName:
		os.Exit(loopext4.FormatterMain())
	case loopext4.MkfsName:
		os.Exit(loopext4.MkfsMain())
	}
	helperkit.Main(loopext4.Spec())
}
