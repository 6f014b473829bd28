package filter_test

import (
	"fmt"
	"log"

	"github.com/writeout/writeout/merger/query/filter"
)

func ExampleParse() {
	f, err := filter.Parse(`country in ('fr', 'de') and not "user agent" is null`)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(f)
	fmt.Printf("%q\n", filter.Dims(f))
	_, err = filter.Parse("country = fr")
	fmt.Println(err)
	// Output:
	// country in ('fr', 'de') and not "user agent" is null
	// ["country" "user agent"]
	// filter: column 11: expected a quoted string or a number after the comparison, found name "fr"
}
