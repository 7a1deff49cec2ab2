// calib native harness (Go). Built with function.go (the function under test and what it needs of its
// file, see calib/executors/native/go.py) and nocover.go, or for x's coverage build with the cover tool's
// copy of function.go and cover.go (calib/executors/native/coverage_go.py). Placeholder filled here:
//
//	CALIB_CALL - generated glue: reads the arguments from calibArgs, calls the function (or the method on
//	             the receiver built from the input state) and writes the output object into calibO.
//
// Protocol: stdin holds one JSON array: the batch key (a random string the host chose for this run), then
// the input states (each a JSON array of argument values). Before any input, one line
// {"key": key, "ready": true}; for input k (counted from 0), one line {"key": key, "i": k, "out": {...}}
// goes to the original stdout, with "cov" (the hex of this process's coverage counters) in the coverage
// build. What the function writes to os.Stdout (fmt.Print...) or fd 1 goes to a private temporary file
// and is reported as "stdout"; a panic is reported as "panic": true. The host keeps only lines with the
// key, which the function (its init functions included) never sees: it is read after they ran
// (docs/native-executors.md, "What the harness guarantees"). Every name here starts with calib and every
// import has a calib alias, so that the function's file (one package with this one) may use any other
// name. Only the standard library is used (encoding/json reads the input).
package main

import (
	calibbufio "bufio"
	calibhex "encoding/hex"
	calibjson "encoding/json"
	calibfmt "fmt"
	calibio "io"
	calibmath "math"
	calibos "os"
	calibreflect "reflect"
	calibsort "sort"
	calibstrconv "strconv"
	calibstrings "strings"
	calibsyscall "syscall"
	calibunsafe "unsafe"
)

// calibShape: the field names of each struct type, in the order the host sends a struct as a JSON array
// (the fields of supported types; a JSON object is read by field name). Set by the glue.
var calibShape map[string][]string

// calibCountsMax: the largest copy of the counters sent (bytes; the host's COUNTS_BYTES).
const calibCountsMax = 1 << 20

func calibInt(v any) int64 {
	switch x := v.(type) {
	case calibjson.Number:
		if i, err := x.Int64(); err == nil {
			return i
		}
		if u, err := calibstrconv.ParseUint(string(x), 10, 64); err == nil {
			return int64(u)
		}
		f, _ := x.Float64()
		return int64(f)
	case bool:
		if x {
			return 1
		}
	case string: // a character (rune)
		for _, r := range x {
			return int64(r)
		}
	}
	return 0
}

func calibUint(v any) uint64 {
	if n, ok := v.(calibjson.Number); ok {
		if u, err := calibstrconv.ParseUint(string(n), 10, 64); err == nil {
			return u
		}
	}
	return uint64(calibInt(v))
}

func calibFloat(v any) float64 {
	switch x := v.(type) {
	case calibjson.Number:
		f, _ := x.Float64()
		return f
	case string:
		switch x {
		case "nan":
			return calibmath.NaN()
		case "inf":
			return calibmath.Inf(1)
		case "-inf":
			return calibmath.Inf(-1)
		}
	}
	return float64(calibInt(v))
}

// calibSettable: v itself, or (an unexported struct field, which reflect will not set) the same memory
// through unsafe; v is addressable.
func calibSettable(v calibreflect.Value) calibreflect.Value {
	if v.CanSet() {
		return v
	}
	return calibreflect.NewAt(v.Type(), calibunsafe.Pointer(v.UnsafeAddr())).Elem()
}

// calibRead sets dst (addressable) from the JSON value src: numbers, characters (a one-character string
// into a rune), bools, strings, slices, structs (an array in calibShape's order or an object by field
// name), pointers (allocated when src is not null). Maps become empty maps (never nil, as a constructor
// would make them); anything else keeps its zero value.
func calibRead(dst calibreflect.Value, src any) {
	dst = calibSettable(dst)
	switch dst.Kind() {
	case calibreflect.Int, calibreflect.Int8, calibreflect.Int16, calibreflect.Int32, calibreflect.Int64:
		dst.SetInt(calibInt(src))
	case calibreflect.Uint, calibreflect.Uint8, calibreflect.Uint16, calibreflect.Uint32, calibreflect.Uint64,
		calibreflect.Uintptr:
		dst.SetUint(calibUint(src))
	case calibreflect.Float32, calibreflect.Float64:
		dst.SetFloat(calibFloat(src))
	case calibreflect.Bool:
		b, _ := src.(bool)
		dst.SetBool(b)
	case calibreflect.String:
		s, _ := src.(string)
		dst.SetString(s)
	case calibreflect.Slice:
		items, _ := src.([]any)
		out := calibreflect.MakeSlice(dst.Type(), len(items), len(items))
		for k, item := range items {
			calibRead(out.Index(k), item)
		}
		dst.Set(out)
	case calibreflect.Map:
		dst.Set(calibreflect.MakeMap(dst.Type()))
	case calibreflect.Pointer:
		if src != nil && dst.Type().Elem().Kind() != calibreflect.Pointer {
			p := calibreflect.New(dst.Type().Elem())
			calibRead(p.Elem(), src)
			dst.Set(p)
		}
	case calibreflect.Struct:
		for k := 0; k < dst.NumField(); k++ {
			if dst.Field(k).Kind() == calibreflect.Map {
				calibRead(dst.Field(k), nil)
			}
		}
		switch s := src.(type) {
		case []any:
			for k, name := range calibShape[dst.Type().Name()] {
				if f := dst.FieldByName(name); f.IsValid() && k < len(s) {
					calibRead(f, s[k])
				}
			}
		case map[string]any:
			for name, item := range s {
				if f := dst.FieldByName(name); f.IsValid() {
					calibRead(f, item)
				}
			}
		}
	}
}

// calibIn reads argument k into *p.
func calibIn(p any, args []any, k int) {
	if k < len(args) {
		calibRead(calibreflect.ValueOf(p).Elem(), args[k])
	}
}

func calibStr(o *calibstrings.Builder, s string) {
	o.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			o.WriteByte('\\')
			o.WriteRune(r)
		case r < 0x20 || r >= 0x7f:
			buf := make([]uint16, 0, 2)
			if r >= 0x10000 {
				r -= 0x10000
				buf = append(buf, uint16(0xD800+(r>>10)), uint16(0xDC00+(r&0x3FF)))
			} else {
				buf = append(buf, uint16(r))
			}
			for _, u := range buf {
				calibfmt.Fprintf(o, "\\u%04x", u)
			}
		default:
			o.WriteRune(r)
		}
	}
	o.WriteByte('"')
}

// calibW writes a value as JSON: numbers, bools, strings, slices, arrays, maps with sorted keys, structs
// (every field, by name, unexported ones too), pointers as what they point to.
func calibW(o *calibstrings.Builder, v any) { calibWv(o, calibreflect.ValueOf(v), 0) }

// calibDepth: how deep calibWv follows values (a cycle of pointers would never end)
const calibDepth = 100

func calibKey(v calibreflect.Value) string {
	switch v.Kind() {
	case calibreflect.String:
		return v.String()
	case calibreflect.Int, calibreflect.Int8, calibreflect.Int16, calibreflect.Int32, calibreflect.Int64:
		return calibstrconv.FormatInt(v.Int(), 10)
	case calibreflect.Uint, calibreflect.Uint8, calibreflect.Uint16, calibreflect.Uint32, calibreflect.Uint64:
		return calibstrconv.FormatUint(v.Uint(), 10)
	}
	var o calibstrings.Builder
	calibWv(&o, v, calibDepth-2)
	return o.String()
}

func calibWv(o *calibstrings.Builder, v calibreflect.Value, depth int) {
	if !v.IsValid() {
		o.WriteString("null")
		return
	}
	if depth >= calibDepth {
		o.WriteString("\"calib: nested too deep\"")
		return
	}
	switch v.Kind() {
	case calibreflect.Int, calibreflect.Int8, calibreflect.Int16, calibreflect.Int32, calibreflect.Int64:
		o.WriteString(calibstrconv.FormatInt(v.Int(), 10))
	case calibreflect.Uint, calibreflect.Uint8, calibreflect.Uint16, calibreflect.Uint32, calibreflect.Uint64,
		calibreflect.Uintptr:
		o.WriteString(calibstrconv.FormatUint(v.Uint(), 10))
	case calibreflect.Float32, calibreflect.Float64:
		f := v.Float()
		switch {
		case calibmath.IsNaN(f):
			o.WriteString("\"nan\"")
		case calibmath.IsInf(f, 1):
			o.WriteString("\"inf\"")
		case calibmath.IsInf(f, -1):
			o.WriteString("\"-inf\"")
		default:
			o.WriteString(calibstrconv.FormatFloat(f, 'g', -1, 64))
		}
	case calibreflect.Bool:
		o.WriteString(calibstrconv.FormatBool(v.Bool()))
	case calibreflect.String:
		calibStr(o, v.String())
	case calibreflect.Slice, calibreflect.Array:
		if v.Kind() == calibreflect.Slice && v.IsNil() {
			o.WriteString("[]")
			return
		}
		o.WriteByte('[')
		for k := 0; k < v.Len(); k++ {
			if k > 0 {
				o.WriteByte(',')
			}
			calibWv(o, v.Index(k), depth+1)
		}
		o.WriteByte(']')
	case calibreflect.Map:
		keys := v.MapKeys()
		names := make([]string, len(keys))
		for k, key := range keys {
			names[k] = calibKey(key)
		}
		idx := make([]int, len(keys))
		for k := range idx {
			idx[k] = k
		}
		calibsort.Slice(idx, func(a, b int) bool { return names[idx[a]] < names[idx[b]] })
		o.WriteByte('{')
		for n, k := range idx {
			if n > 0 {
				o.WriteByte(',')
			}
			calibStr(o, names[k])
			o.WriteByte(':')
			calibWv(o, v.MapIndex(keys[k]), depth+1)
		}
		o.WriteByte('}')
	case calibreflect.Pointer, calibreflect.Interface:
		if v.IsNil() {
			o.WriteString("null")
		} else {
			calibWv(o, v.Elem(), depth+1)
		}
	case calibreflect.Struct:
		o.WriteByte('{')
		for k := 0; k < v.NumField(); k++ {
			if k > 0 {
				o.WriteByte(',')
			}
			calibStr(o, v.Type().Field(k).Name)
			o.WriteByte(':')
			calibWv(o, v.Field(k), depth+1)
		}
		o.WriteByte('}')
	default:
		calibStr(o, v.Type().String())
	}
}

func calibCall(calibArgs []any, calibO *calibstrings.Builder) {
	defer func() {
		if r := recover(); r != nil {
			calibO.Reset()
			calibO.WriteString("\"panic\":true")
		}
	}()
	/*@CALIB_CALL@*/
}

func main() {
	dec := calibjson.NewDecoder(calibbufio.NewReader(calibos.Stdin))
	dec.UseNumber()
	var all []any
	if err := dec.Decode(&all); err != nil {
		calibfmt.Fprintln(calibos.Stderr, "calib: malformed input JSON:", err)
		calibos.Exit(3)
	}
	key, ok := "", len(all) > 0
	if ok {
		key, ok = all[0].(string)
	}
	if !ok || len(key) > 64 {
		calibfmt.Fprintln(calibos.Stderr, "calib: malformed input JSON: no batch key")
		calibos.Exit(3)
	}
	head := "{\"key\":\"" + key + "\"," // the host's key is hex: nothing to escape
	all = all[1:]
	// the results go on a duplicate of fd 1; fd 1 itself (and os.Stdout) becomes the private file
	channel, err := calibsyscall.Dup(1)
	capture, err2 := calibos.CreateTemp("", "calib-stdout-")
	if err == nil && err2 == nil {
		err = calibsyscall.Dup3(int(capture.Fd()), 1, 0)
	}
	if err != nil || err2 != nil {
		calibfmt.Fprintln(calibos.Stderr, "calib:", err, err2)
		calibos.Exit(3)
	}
	out := calibos.NewFile(uintptr(channel), "calib-results")
	calibos.Remove(capture.Name())
	calibos.Stdout = capture
	calibfmt.Fprintln(out, head+"\"ready\":true}")
	for k, item := range all {
		capture.Truncate(0)
		capture.Seek(0, calibio.SeekStart)
		var o calibstrings.Builder
		args, _ := item.([]any)
		calibCall(args, &o)
		capture.Seek(0, calibio.SeekStart)
		printed, _ := calibio.ReadAll(calibio.LimitReader(capture, 1<<16))
		var line calibstrings.Builder
		calibfmt.Fprintf(&line, "%s\"i\":%d,\"out\":{%s,\"stdout\":", head, k, o.String())
		calibStr(&line, calibstrings.ToValidUTF8(string(printed), "\uFFFD"))
		line.WriteString("}")
		if counts := calibCounts(); counts != nil && len(counts) <= calibCountsMax {
			line.WriteString(",\"cov\":\"" + calibhex.EncodeToString(counts) + "\"")
		}
		line.WriteString("}\n")
		out.WriteString(line.String())
	}
}
