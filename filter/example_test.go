package filter_test

import (
	"errors"
	"fmt"

	"github.com/xdpio/xdpio/filter"
)

func ExampleCompile() {
	prog, err := filter.Compile("tcp[tcpflags] & tcp-syn != 0")
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, ins := range prog {
		fmt.Println(ins)
	}

	_, err = filter.Compile("ip protochain 6")
	fmt.Println(errors.Is(err, filter.ErrUnsupportedConstruct), err)
	// Output:
	// ldh [12]
	// jneq #2048,9
	// ldb [23]
	// jneq #6,7
	// ldh [20]
	// jset #8191,5
	// ldx 4*([14]&0xf)
	// ldb [x + 27]
	// and #2
	// jneq #0,0
	// ret #262144
	// ret #0
	// true filter "ip protochain 6": unsupported construct "protochain" at offset 3: not implemented
}
