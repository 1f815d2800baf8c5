package shim

// For the external tests, which plant cache entries in a real run.
var (
	EncodeCacheEntry = encodeCacheEntry
	DecodeCacheEntry = decodeCacheEntry
)
