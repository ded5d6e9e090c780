// The `prism` command: everything lives in prism::explorer::run_cli.
#include "explorer/cli.hpp"

int main(int argc, char** argv) { return prism::explorer::run_cli(argc, argv); }
