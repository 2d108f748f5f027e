const long long SHIFT = {{shift}};
