module github.com/attngen/attngen

go 1.26.0

require go.yaml.in/yaml/v3 v3.0.6

require golang.org/x/image v0.48.0

require github.com/ebitengine/purego v0.11.3
