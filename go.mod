module github.com/attngen/attngen

go 1.26.0

require go.yaml.in/yaml/v3 v3.0.6

require golang.org/x/image v0.48.0

require github.com/ebitengine/purego v0.11.3

require (
	github.com/mmcloughlin/avo v0.6.0
	golang.org/x/sys v0.50.0
)

require (
	github.com/dave/jennifer v1.7.1 // indirect
	golang.org/x/mod v0.42.0 // indirect
	golang.org/x/sync v0.24.0 // indirect
	golang.org/x/tools v0.52.0 // indirect
)
