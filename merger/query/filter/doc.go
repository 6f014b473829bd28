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
//	a = 'x' and (b = 'y' or not c is null)
//	true, false                      every row, no row
//
// Precedence, loosest first: or, and, not. Keywords are case-insensitive. A dimension name is
// a word of letters, digits, '_', '.' and '-' (not starting with a digit, '.' or '-'), or any
// text in double quotes. Strings are in single quotes. Inside either quotes, a backslash
// escapes: \\ \' \" \n \r \t, \xHH (a byte), \uHHHH and \UHHHHHHHH (a code point). Filter.String
// writes a filter back in this language. A syntax error's message gives the 1-based column.
package filter
