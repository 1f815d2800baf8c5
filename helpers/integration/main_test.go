package integration

import (
	"testing"

	"github.com/glove-sandbox/glove/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }
