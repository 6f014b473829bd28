// Package filter is the filter language of writeout's queries: the filters that select rows of
// segments and builders, Parse, which reads them written as text, and Eval, which the query
// engine (package merger/query) runs them with.
//
// # Expressions
//
//	page = 'home'                    the row holds the value (any of its values, multi-value); also "=="
//	page != 'home'                   not (page = 'home'); also "<>"; null rows match it
//	page in ('home', 'about')        the row holds any of the values
//	page not in ('home')             not (page in ('home'))
//	page is null                     null row, or empty multi-value list
//	page is not null                 not (page is null)
//	delay > 10                       a long or double metric compared with a number: <, <=,
//	                                 >, >=, =, != (also ==, <>); a null matches none
//	distance between 100 and 500     inclusive, as SQL; also "not between" (nulls match neither)
//	delay in (1, 2)                  the value is one of the numbers; also "not in" (not nulls)
//	delay is null                    the metric's value is null
//	a = 'x' and (b = 'y' or not c is null)
//	true, false                      every row, no row
//
// Numbers are decimal, optionally negative, with a fraction and an exponent (-2.5, .5, 1e6).
// A long metric compares exactly: the number's floor and ceiling are found as big integers
// (delay > 10.5 is delay >= 11, and values past 2^53 are not rounded); a double metric
// compares with the number rounded to float64, as SQL casts a literal. A column's schema
// decides what it is: strings compare with dimensions, numbers with long and double metrics
// (Columns lists each predicate's column and use, for the query to check). "not" is the
// complement within the rows, nulls included, also for metrics: not (delay > 10) holds for a
// null delay, delay <= 10 does not.
//
// Precedence, loosest first: or, and, not. Keywords are case-insensitive. A column name is
// a word of letters, digits, '_', '.' and '-' (not starting with a digit, '.' or '-'), or any
// text in double quotes. Strings are in single quotes. Inside either quotes, a backslash
// escapes: \\ \' \" \n \r \t, \xHH (a byte), \uHHHH and \UHHHHHHHH (a code point). Filter.String
// writes a filter back in this language. A syntax error's message gives the 1-based column.
package filter
