module github.com/glove-sandbox/glove

go 1.26.0

require (
	github.com/go-json-experiment/json v1.27.2
	github.com/sirupsen/logrus v1.10.2
	golang.org/x/net v0.62.0
	golang.org/x/sys v0.50.0
)
