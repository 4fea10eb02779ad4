"""CMake modules for building backends; a package so that its ``cmake.module`` entry point can name it."""
