// Package gguf reads and writes GGUF (v2 and v3) headers: metadata, the tensor table and the data layout.
//
// Reading streams through the header only and never loads tensor data, so it is cheap on multi-GB models; lengths
// and counts are capped and checked against the file size, so corrupt or hostile files produce errors, not panics
// or huge allocations. Writing produces byte-for-byte reproducible files; tensors without data become holes of a
// sparse file, which lets tests build header-only copies of real models of any size.
//
// The package does not dequantize, mmap or interpret tensors; it knows every ggml type's block layout so sizes
// are exact.
package gguf
