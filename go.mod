module github.com/writeout/writeout

go 1.26.8

require github.com/stretchr/testify v1.12.1

require (
	github.com/RoaringBitmap/roaring/v2 v2.30.0 // indirect
	github.com/axiomhq/hyperloglog v0.3.0 // indirect
	github.com/bits-and-blooms/bitset v1.24.4 // indirect
	github.com/dgryski/go-metro v0.0.0-20250106013310-edb8663e5e33 // indirect
	github.com/kamstrup/intmap v0.5.2 // indirect
	github.com/klauspost/compress v1.20.4 // indirect
	github.com/mschoch/smat v0.2.0 // indirect
	github.com/spf13/afero v1.15.0 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
	golang.org/x/sys v0.50.0 // indirect
	golang.org/x/text v0.28.0 // indirect
)
