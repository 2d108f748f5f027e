SHIFT = {{shift}}
