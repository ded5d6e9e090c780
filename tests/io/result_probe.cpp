// Reads a result file of the test data set (result_test_data.hpp) in a process of its own, as
// a user's reader would while a sweep writes it, and prints one line:
//   rows N next_index X filtered a=1,b=2 failures F ok
// ("ok" becomes the first difference from the test data set, or the line is "error: ...").
// A process of its own also because HDF5 1.10 misreads, in the process that writes a file,
// chunks that this process rewrote raw.

#include <exception>
#include <iostream>
#include <string>

#include "io/result_store.hpp"
#include "tests/io/result_test_data.hpp"

int main(int argc, char** argv) {
    if (argc != 2) {
        std::cerr << "usage: result_probe FILE\n";
        return 2;
    }
    try {
        const prism::io::ResultReader reader(argv[1]);
        std::string filtered;
        for (const auto& [reason, count] : reader.filtered()) {
            filtered += (filtered.empty() ? "" : ",") + reason + "=" + std::to_string(count);
        }
        const std::string check = prism::io::test_data::check_rows(reader, reader.rows());
        std::cout << "rows " << reader.rows() << " next_index " << reader.header().next_index
                  << " filtered " << filtered << " failures " << reader.failures().size() << " "
                  << (check.empty() ? "ok" : check) << "\n";
    } catch (const std::exception& e) {
        std::cout << "error: " << e.what() << "\n";
    }
    return 0;
}
