// calib native harness (Go). Placeholders filled by calib/executors/native/__init__.py:
//   CALIB_FUNCTION - the function under test (truth or candidate), verbatim;
//   CALIB_CALL     - generated glue: reads the arguments from `args`, calls the function and writes the
//                    output object into `o`.
// Protocol: stdin holds one JSON array: the batch key (a random string the host chose for this run), then
// the input states (each a JSON array of argument values). Before any input, one line
// {"key": key, "ready": true}; for input k (counted from 0), one line {"key": key, "i": k, "out": {...}}
// goes to the original stdout. What the function writes to os.Stdout (fmt.Print...) or fd 1 goes to a
// private temporary file and is reported as "stdout"; a panic is reported as "panic": true. The host keeps only
// lines with the key, which the function (its init functions included) never sees: it is read after they
// ran (docs/native-executors.md, "What the harness guarantees"). Only the standard library is used
// (encoding/json reads the input).
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"unicode/utf8"
)

var _ = fmt.Sprint
var _ = sort.Ints
var _ = strings.Repeat
var _ = math.Abs
var _ = utf8.RuneLen

/*@CALIB_FUNCTION@*/

func jInt(v any) int64 {
	switch x := v.(type) {
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return i
		}
		f, _ := x.Float64()
		return int64(f)
	case bool:
		if x {
			return 1
		}
	}
	return 0
}

func jUint(v any) uint64 {
	if n, ok := v.(json.Number); ok {
		if u, err := strconv.ParseUint(string(n), 10, 64); err == nil {
			return u
		}
	}
	return uint64(jInt(v))
}

func jNum(v any) float64 {
	if n, ok := v.(json.Number); ok {
		f, _ := n.Float64()
		return f
	}
	return float64(jInt(v))
}

func jBool(v any) bool { b, _ := v.(bool); return b }
func jStr(v any) string { s, _ := v.(string); return s }
func jRune(v any) rune {
	for _, r := range jStr(v) {
		return r
	}
	return 0
}
func jArr(v any) []any { a, _ := v.([]any); return a }

func wStr(o *strings.Builder, s string) {
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
				fmt.Fprintf(o, "\\u%04x", u)
			}
		default:
			o.WriteRune(r)
		}
	}
	o.WriteByte('"')
}

// w writes a value as JSON: numbers, bools, strings, slices, arrays, maps with sorted keys, structs.
func w(o *strings.Builder, v any) { wv(o, reflect.ValueOf(v)) }

func wv(o *strings.Builder, v reflect.Value) {
	if !v.IsValid() {
		o.WriteString("null")
		return
	}
	switch v.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int64:
		o.WriteString(strconv.FormatInt(v.Int(), 10))
	case reflect.Int32: // rune
		o.WriteString(strconv.FormatInt(v.Int(), 10))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		o.WriteString(strconv.FormatUint(v.Uint(), 10))
	case reflect.Float32, reflect.Float64:
		f := v.Float()
		switch {
		case math.IsNaN(f):
			o.WriteString("\"nan\"")
		case math.IsInf(f, 1):
			o.WriteString("\"inf\"")
		case math.IsInf(f, -1):
			o.WriteString("\"-inf\"")
		default:
			o.WriteString(strconv.FormatFloat(f, 'g', -1, 64))
		}
	case reflect.Bool:
		o.WriteString(strconv.FormatBool(v.Bool()))
	case reflect.String:
		wStr(o, v.String())
	case reflect.Slice, reflect.Array:
		if v.Kind() == reflect.Slice && v.IsNil() {
			o.WriteString("[]")
			return
		}
		o.WriteByte('[')
		for k := 0; k < v.Len(); k++ {
			if k > 0 {
				o.WriteByte(',')
			}
			wv(o, v.Index(k))
		}
		o.WriteByte(']')
	case reflect.Map:
		keys := v.MapKeys()
		names := make([]string, len(keys))
		for k, key := range keys {
			names[k] = fmt.Sprint(key.Interface())
		}
		idx := make([]int, len(keys))
		for k := range idx {
			idx[k] = k
		}
		sort.Slice(idx, func(a, b int) bool { return names[idx[a]] < names[idx[b]] })
		o.WriteByte('{')
		for n, k := range idx {
			if n > 0 {
				o.WriteByte(',')
			}
			wStr(o, names[k])
			o.WriteByte(':')
			wv(o, v.MapIndex(keys[k]))
		}
		o.WriteByte('}')
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			o.WriteString("null")
		} else {
			wv(o, v.Elem())
		}
	case reflect.Struct:
		o.WriteByte('{')
		for k := 0; k < v.NumField(); k++ {
			if k > 0 {
				o.WriteByte(',')
			}
			wStr(o, v.Type().Field(k).Name)
			o.WriteByte(':')
			wv(o, v.Field(k))
		}
		o.WriteByte('}')
	default:
		wStr(o, v.Type().String())
	}
}

func call(args []any, o *strings.Builder) {
	defer func() {
		if r := recover(); r != nil {
			o.Reset()
			o.WriteString("\"panic\":true")
		}
	}()
	/*@CALIB_CALL@*/
}

func main() {
	dec := json.NewDecoder(bufio.NewReader(os.Stdin))
	dec.UseNumber()
	var all []any
	if err := dec.Decode(&all); err != nil {
		fmt.Fprintln(os.Stderr, "calib: malformed input JSON:", err)
		os.Exit(3)
	}
	key, ok := "", len(all) > 0
	if ok {
		key, ok = all[0].(string)
	}
	if !ok || len(key) > 64 {
		fmt.Fprintln(os.Stderr, "calib: malformed input JSON: no batch key")
		os.Exit(3)
	}
	head := "{\"key\":\"" + key + "\"," // the host's key is hex: nothing to escape
	all = all[1:]
	// the results go on a duplicate of fd 1; fd 1 itself (and os.Stdout) becomes the private file
	channel, err := syscall.Dup(1)
	capture, err2 := os.CreateTemp("", "calib-stdout-")
	if err == nil && err2 == nil {
		err = syscall.Dup3(int(capture.Fd()), 1, 0)
	}
	if err != nil || err2 != nil {
		fmt.Fprintln(os.Stderr, "calib:", err, err2)
		os.Exit(3)
	}
	out := os.NewFile(uintptr(channel), "calib-results")
	os.Remove(capture.Name())
	os.Stdout = capture
	fmt.Fprintln(out, head+"\"ready\":true}")
	for k, item := range all {
		capture.Truncate(0)
		capture.Seek(0, io.SeekStart)
		var o strings.Builder
		call(jArr(item), &o)
		capture.Seek(0, io.SeekStart)
		printed, _ := io.ReadAll(io.LimitReader(capture, 1<<16))
		var line strings.Builder
		fmt.Fprintf(&line, "%s\"i\":%d,\"out\":{%s,\"stdout\":", head, k, o.String())
		wStr(&line, strings.ToValidUTF8(string(printed), "\uFFFD"))
		line.WriteString("}}\n")
		out.WriteString(line.String())
	}
}
